"""A speculative method that is not lossless: its greedy answer leaves the same engine's
plain greedy answer at a position where no rounding explains it (the two likeliest tokens
are not near-tied there). This is the vLLM #39273 class of bug: ngram speculation
corrupting a Gated DeltaNet model's output while acceptance looked healthy, so no counter
shows it; only the answers do.

The differential test of engines (`adapters.differential`) finds it by comparing answers to
many prompts, not from one session's log: the finding then has no place in a log (seq 0,
no slot or turn) and names the prompt and answer position instead.
"""

from dataclasses import asdict, dataclass

from eventlog.postmortem.advice import ADVICE
from eventlog.postmortem.finding import Finding, Kind, Severity


@dataclass(frozen=True)
class NotLossless:
    """What the differential saw: the engine and its speculative method (the engine's name
    for it) and dtype; of `answers` answers compared, `differing` left the plain ones and
    `not_ties` of those at a non-tie (`failed` more prompts got no answer from one of the
    two runs: the engine died on them); the first such: the prompt's index, the answer
    position, plain's token and the speculative one, the gap each engine run reported there
    (None: not reported) and the near-tie bound; the run's drafted and accepted tokens."""

    engine: str
    method: str
    dtype: str
    answers: int
    differing: int
    not_ties: int
    failed: int
    prompt: int
    position: int
    expected: int | None
    actual: int | None
    expected_gap: float | None
    actual_gap: float | None
    bound: float
    drafted: int
    accepted: int

    @property
    def acceptance(self) -> float | None:
        """Accepted over drafted tokens (None when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else None


def _gap(g: float | None) -> str:
    return "not reported" if g is None else f"{g:.3g}"


def not_lossless_finding(seen: NotLossless) -> Finding:
    """The `speculative_not_lossless` error for what the differential saw."""
    acc = "" if seen.acceptance is None else (
        f" Acceptance was {seen.acceptance:.2f} ({seen.accepted}/{seen.drafted}); no "
        f"counter of the engine checks the output itself.")
    died = (f" {seen.failed} more prompt(s) got no answer: the engine died on them."
            if seen.failed else "")
    text = (f"{seen.engine} with speculative method {seen.method} ({seen.dtype}) is not "
            f"lossless: of {seen.answers} greedy answers compared with {seen.engine}'s plain "
            f"ones, {seen.differing} differ, {seen.not_ties} at a non-tie. First: prompt "
            f"{seen.prompt}, answer token {seen.position}: plain {seen.expected}, speculative "
            f"{seen.actual}; top-2 gap {_gap(seen.expected_gap)} plain, "
            f"{_gap(seen.actual_gap)} speculative, above the near-tie bound {seen.bound:g}, "
            f"so rounding cannot explain it (vLLM #39273 class).{acc}{died}")
    return Finding(Kind.SPECULATIVE_NOT_LOSSLESS, Severity.ERROR, 0, 0, text,
                   ADVICE[Kind.SPECULATIVE_NOT_LOSSLESS], asdict(seen))
