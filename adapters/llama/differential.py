"""Differential test of two engines: llama-server's greedy answers, with and without each
drafter, against our engine's greedy plain answers, token by token, on the same weights.

Greedy speculative decoding is lossless, so every answer should equal plain decode's,
and two correct implementations of the same f32 model differ only by rounding. Where an
answer differs, the first divergent position must therefore be a near-tie of our logits:
a top-1 minus top-2 logit gap of at most GAP_BOUND. Anything else (a stray token left in
the recurrent state, a wrong rollback, a mis-converted tensor) moves logits by far more.

GAP_BOUND = 1e-3 is about 100x the rounding measured between the two engines: with
llama-server computing in f32 (f32 GGUF and KV cache, no flash attention, as
`ServerOptions` defaults), the top-2 gap of its `n_probs` log-probabilities differed from
ours by at most 1.1e-5 (median 5.5e-7) over 1,448 greedy positions of 20 held-out
prompts, 2.2e-6 at the first answer token (the batched prefill path, the one a
speculative verify takes). With llama.cpp's CPU flash attention (f16 inside) the same
figure is 5.7e-3, so that setting would need a looser bound.

The prompts are the held-out stdlib questions a torch session asks in its first turn
(`specledger run --backend torch --seed S`), one per seed, in ChatML, duplicates skipped.
"""

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from adapters.llama.client import Completion

GAP_BOUND = 1e-3
ANSWER_CAP = 128


@dataclass(frozen=True)
class Reference:
    """Our greedy answer to one prompt, with our top-1 minus top-2 logit gap at each
    answer position (gaps[i] is the margin by which tokens[i] won)."""

    prompt: tuple[int, ...]
    tokens: tuple[int, ...]
    gaps: tuple[float, ...]


@dataclass(frozen=True)
class Divergence:
    """Where one of llama-server's answers first leaves ours. `ours` / `theirs` is None
    where that answer had already ended; `gap` is our logit gap there (infinite when an
    answer ended: a length difference is no near-tie)."""

    prompt: int
    position: int
    ours: int | None
    theirs: int | None
    gap: float

    @property
    def near_tie(self) -> bool:
        """Whether rounding can explain it (gap within GAP_BOUND)."""
        return self.gap <= GAP_BOUND


@dataclass
class DrafterResult:
    """One drafter's answers against the references."""

    drafter: str
    answers: int = 0
    identical: int = 0
    drafted: int = 0
    accepted: int = 0
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def explained(self) -> bool:
        """Every divergence is a near-tie."""
        return all(d.near_tie for d in self.divergences)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping, divergences included."""
        return asdict(self)


def held_out_prompts(checkpoint: Any, n: int) -> list[list[int]]:
    """`n` distinct first-turn prompts of torch sessions, seeds 0, 1, ... (two seeds can
    pick the same function): the session's question for slot 0, turn 1, in the model's
    chat template."""
    from engine.config import RunConfig
    from engine.conversation import HeldOutConversation
    from engine.hybrid.backend import template_for

    template = template_for(checkpoint.tokenizer)
    prompts: dict[tuple[int, ...], None] = {}  # insertion-ordered set
    seed = 0
    while len(prompts) < n:
        question = HeldOutConversation(RunConfig(backend="torch", seed=seed, turns=1))
        prompts[tuple(template.next_prompt([], question.question(0, 1)))] = None
        seed += 1
    return [list(p) for p in prompts]


def reference_answer(model: Any, prompt: Sequence[int], cap: int = ANSWER_CAP) -> Reference:
    """Our greedy answer to `prompt` (one prefill, then a token per forward, as plain
    decode does), ending after an end-of-generation token or `cap` tokens."""
    import torch

    from engine.hybrid.tokenizer import END_OF_TEXT, IM_END

    tokens: list[int] = []
    gaps: list[float] = []
    with torch.inference_mode():
        state = model.new_state()
        logits = model(torch.tensor([list(prompt)]), state, last_only=True)[0, -1]
        while len(tokens) < cap:
            top = torch.topk(logits.double(), 2)
            tokens.append(int(top.indices[0]))
            gaps.append(float(top.values[0] - top.values[1]))
            if tokens[-1] in (IM_END, END_OF_TEXT):
                break
            logits = model(torch.tensor([[tokens[-1]]]), state, last_only=True)[0, -1]
    return Reference(tuple(prompt), tuple(tokens), tuple(gaps))


def first_divergence(index: int, ref: Reference, theirs: Sequence[int]) -> Divergence | None:
    """Where `theirs` first differs from our answer to prompt `index`, or None."""
    ours = ref.tokens
    if tuple(theirs) == ours:
        return None
    pos = next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
               min(len(ours), len(theirs)))
    if pos < len(ours) and pos < len(theirs):
        return Divergence(index, pos, ours[pos], theirs[pos], ref.gaps[pos])
    return Divergence(index, pos, ours[pos] if pos < len(ours) else None,
                      theirs[pos] if pos < len(theirs) else None, math.inf)


def compare(drafter: str, refs: Sequence[Reference],
            answers: Sequence[Completion]) -> DrafterResult:
    """One drafter's completions (in prompt order) against the references."""
    result = DrafterResult(drafter, answers=len(answers))
    for i, (ref, answer) in enumerate(zip(refs, answers, strict=True)):
        result.drafted += answer.draft_n
        result.accepted += answer.draft_accepted
        d = first_divergence(i, ref, answer.tokens)
        if d is None:
            result.identical += 1
        else:
            result.divergences.append(d)
    return result


def report(results: Sequence[DrafterResult]) -> str:
    """A line per drafter, then one per divergence with its gap."""
    lines = []
    for r in results:
        acc = f", acceptance {r.accepted / r.drafted:.2f}" if r.drafted else ""
        lines.append(f"{r.drafter}: {r.identical}/{r.answers} token-identical, "
                     f"{len(r.divergences)} divergent{acc}")
        lines += [f"  prompt {d.prompt} position {d.position}: ours {d.ours}, llama "
                  f"{d.theirs}, our top-2 gap {d.gap:.3g} "
                  f"({'near-tie' if d.near_tie else 'NOT a near-tie'})"
                  for d in r.divergences]
    return "\n".join(lines)
