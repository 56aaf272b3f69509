"""Whether a torch cell's first changed token is a near-tie: the target's two likeliest
tokens at that position, from one fresh forward over the slot's tokens before it.

Token ids are argmaxes of float logits, so a CPU whose rounding differs could flip one
where the top two logits (nearly) tie. The golden grid has no such tie: its smallest
top-1/top-2 gap is 1.2e-2 in the target's choices and 2.3e-3 in the MTP head's drafts,
while running it under ATEN_CPU_CAPABILITY=default and avx2 moved no logit by more than
2.1e-5 (`ROUNDING`). A changed target token with a gap far above that is a change of
behaviour; one with a gap near it is the rounding of a new machine."""

import re

import torch

from engine.config import RunConfig
from engine.hybrid.backend import UBATCH, TorchBackend
from eventlog.projection import project
from fsm.event import Event
from fsm.states import Trigger

ROUNDING = 2.1e-5  # the most a logit moved between ATen's default and avx2 kernels
_TARGET = re.compile(r"payload\.(targets|append)\[(\d+)\]")
_TARGETS_AFTER_DRAFTS = (Trigger.VERIFY, Trigger.RETRY)


def context(events: list[Event], index: int, field: str) -> list[int] | None:
    """The tokens the target had read when it chose the token at `field` of
    events[index] (None: the field is not a target's token)."""
    ev = events[index]
    found = _TARGET.fullmatch(field)
    if found is None or (found[1] == "append") != (ev.trigger is Trigger.PREFILL):
        return None
    if ev.trigger not in (*_TARGETS_AFTER_DRAFTS, Trigger.DECODE, Trigger.PREFILL):
        return None
    view = project(events[:index]).get(ev.slot)
    tokens = list(view.tokens) if view is not None else []
    if ev.trigger in _TARGETS_AFTER_DRAFTS:
        tokens += ev.payload["drafts"][:int(found[2])]
    return tokens


def top_two(config: RunConfig, tokens: list[int]) -> tuple[tuple[int, float], ...]:
    """The target's two likeliest next tokens after `tokens`, with their logits."""
    torch.set_num_threads(config.threads)
    backend = TorchBackend(config)
    state = backend.new_state()
    with torch.no_grad():
        for i in range(0, len(tokens), UBATCH):
            ids = torch.tensor([tokens[i:i + UBATCH]], dtype=torch.long)
            logits = backend.model.forward(ids, state)[0, -1]
    values, ids = logits.float().topk(2)
    return tuple((int(t), float(v)) for t, v in zip(ids, values, strict=True))


def explain(config: RunConfig, events: list[Event], index: int, field: str) -> str:
    """A note on the changed token at `field` of events[index]: the target's top two
    there and their gap, or why there is none to give."""
    tokens = context(events, index, field)
    if tokens is None:
        return ("not a target token: a draft is the drafter's choice"
                if "drafts[" in field else "")
    (first, v1), (second, v2) = top_two(config, tokens)
    return (f"the target's top two after the {len(tokens)} tokens before it (a fresh "
            f"forward): {first} at {v1:.6g}, {second} at {v2:.6g}, gap {v1 - v2:.3g}, "
            f"{verdict(v1 - v2)}")


def verdict(gap: float) -> str:
    """What a top-two `gap` at a changed token says: rounding, or a change of behaviour."""
    if gap > 50 * ROUNDING:
        return (f"far wider than the {ROUNDING:.1g} rounding moves a logit between CPUs: "
                "behaviour changed")
    return ("within reach of rounding: a near-tie this machine tips the other way; move "
            "the cell off it")
