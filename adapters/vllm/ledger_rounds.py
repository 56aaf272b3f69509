"""One placed vLLM engine step (adapters/vllm/steps.py) fired through the round machine with
the triggers our own engine fires for the same work (engine/round.py) and its payloads
(fsm/payloads.py), so a vLLM session reads, projects and is checked like ours.

What vLLM shows of a verify step is its drafted and accepted counts and the tokens it
emitted: the accepted drafts (each equal to the target's token there) and the target's
own token after them. The rejected drafts' ids and the target's tokens past the first
rejection are None. vLLM verifies a hybrid model's drafts keeping the recurrent state of
every verified position and continuing from the accepted one (its `spec_state_indices`,
strategy `per_token`); it does not report that selection, so the restore carries
`logged: false`, as llama.cpp's per-sequence states do. The tokens an answer stopped
before (an end-of-generation id or the length limit inside the step) are the commit's
`cut`: vLLM ends the request there and frees its state.
"""

from collections.abc import Collection, Sequence

from adapters.vllm.steps import Step, StepKind
from engine.config import Strategy
from fsm.machine import RoundMachine
from fsm.payloads import Draft, Verify
from fsm.states import Trigger


def _eog(block: Sequence[int], eog_ids: Collection[int]) -> int | None:
    return next((i for i, t in enumerate(block) if t in eog_ids), None)


def fire_step(m: RoundMachine, step: Step, block: list[int], position: int,
              drafter: str | None, eog_ids: Collection[int]) -> int:
    """Fire one decode step's round on `m` (its turn and round already set); `block` is
    what it emitted, `position` the state's position before it. Returns the position
    after its commit."""
    eog = _eog(block, eog_ids)
    after = position + len(block)
    if step.kind is StepKind.PLAIN:
        m.fire(Trigger.DECODE, 0.0, {"targets": list(block), "drafted": 0, "batch": 1})
        m.fire(Trigger.ACCEPT, 0.0, {"matched": 0, "eog": eog})
        m.fire(Trigger.COMMIT, 0.0, {"append": list(block), "position": after,
                                     "accepted": 0, "cut": 0})
        return after
    k, j = step.drafted, step.accepted
    known = min(j, len(block))  # accepted drafts the answer shows
    drafts: list[int | None] = [*block[:known], *[None] * (k - known)]
    m.fire(Trigger.BEGIN, 0.0, {"strategy": Strategy.PER_TOKEN.value, "position": position})
    draft: Draft = {"drafts": drafts, "drafter": drafter}
    m.fire(Trigger.DRAFT, 0.0, draft)
    # The target's token after each batch position: known through the first rejection,
    # where the answer did not stop before it.
    targets: list[int | None] = [block[i] if i <= j and i < len(block) else None
                                 for i in range(k + 1)]
    verify: Verify = {"drafts": drafts, "targets": targets, "batch": k + 1, "drafted": k}
    m.fire(Trigger.VERIFY, 0.0, verify)
    if j == k and step.cut == 0:
        m.fire(Trigger.ACCEPT, 0.0, {"matched": j, "eog": eog})
    else:
        m.fire(Trigger.REJECT, 0.0, {"matched": j, "eog": eog, "cut": step.cut})
        m.fire(Trigger.RESTORE, 0.0, {"mode": "select", "index": len(block) - 1,
                                      "position": after, "logged": False})
    m.fire(Trigger.COMMIT, 0.0, {"append": list(block), "position": after, "accepted": j,
                                 "cut": step.cut})
    return after
