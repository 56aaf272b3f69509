"""Where each of vLLM's engine steps falls in a streamed answer: the rounds of a turn.

vLLM reports, per request (`--per-request-spec-decode-metrics detailed`), the drafted and
accepted counts of every verify step in order, but not the steps without a draft: an
ngram lookup that finds no match leaves the step a plain decode of one token, and the
report does not say where those fell. The stream says it: a step's tokens arrive
together, one chunk (`token_ids`) per step, the first chunk holding the token the prefill
sampled; the last step may emit fewer tokens than it verified (the answer stopped inside
it: an end-of-generation token or the length limit).

`place_steps` reads each chunk as one step: the prefill's one token, then the verify steps
in vLLM's order (each emits its accepted drafts and the target's token) with plain steps
(one token) between them. Exactly one reading gives the turn's rounds. None fits where the
server's output queue merged steps into one chunk (its consumer fell behind); several fit
where a verify step that accepted no draft (one token) sits among plain steps, which look
the same. Then the rounds are not known: the caller records the turn without them, never a
guess. MTP and a draft model draft at every step, so their answers always fit once.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class StepKind(StrEnum):
    """What one engine step of a request was."""

    PREFILL = "prefill"  # the prompt, sampling the first token
    PLAIN = "plain"      # one token, no draft
    VERIFY = "verify"    # drafts verified: the accepted ones and the target's token


@dataclass(frozen=True)
class Step:
    """One engine step: its kind, drafted and accepted drafts (0 for the others), the
    tokens it emitted (fewer than accepted + 1 when the answer stopped inside it), and
    where in the answer they start."""

    kind: StepKind
    start: int
    emitted: int
    drafted: int = 0
    accepted: int = 0

    @property
    def cut(self) -> int:
        """Tokens the step verified but the answer stopped before."""
        return (self.accepted + 1) - self.emitted if self.kind is StepKind.VERIFY else 0


_MANY = 2  # counting fits stops here: two are as ambiguous as more


def place_steps(chunks: Sequence[int], drafted: Sequence[int], accepted: Sequence[int]
                ) -> list[Step] | None:
    """The one sequence of steps, one per chunk, that emits an answer streamed in chunks
    of `chunks` tokens, given vLLM's verify steps (`drafted[i]`, `accepted[i]`, in order);
    None when no sequence or several fit."""
    n, m = len(drafted), len(chunks)
    if len(accepted) != n or not chunks or chunks[0] != 1 or m - 1 < n:
        return None
    # fits[c][i]: ways (capped) to read chunks c.. with verify steps i.. still to place.
    fits = [[0] * (n + 1) for _ in range(m + 1)]
    fits[m][n] = 1
    for c in range(m - 1, 0, -1):
        for i in range(n, -1, -1):
            fits[c][i] = min(sum(fits[c + 1][i + int(verify)]
                                 for verify in _readings(chunks, c, accepted, i)), _MANY)
    if fits[1][0] != 1:
        return None
    steps = [Step(StepKind.PREFILL, 0, 1)]
    start, i = 1, 0
    for c in range(1, m):
        verify = next(v for v in _readings(chunks, c, accepted, i) if fits[c + 1][i + int(v)])
        steps.append(Step(StepKind.VERIFY, start, chunks[c], drafted[i], accepted[i])
                     if verify else Step(StepKind.PLAIN, start, 1))
        start, i = start + chunks[c], i + int(verify)
    return steps


def _readings(chunks: Sequence[int], c: int, accepted: Sequence[int], i: int) -> list[bool]:
    """How chunk `c` can be read with verify steps `i..` still to place: as a plain step
    (False: one token) and/or as verify step `i` (True: its accepted drafts and the
    target's token, or fewer in the last chunk, where the answer stopped)."""
    size, out = chunks[c], []
    if size == 1:
        out.append(False)
    if i < len(accepted):
        full = accepted[i] + 1
        if size == full or (c == len(chunks) - 1 and i == len(accepted) - 1 and size < full):
            out.append(True)
    return out
