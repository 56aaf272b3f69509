"""Output against a recorded non-speculative reference: where invariant 4 (lossless) is
decided. The engine cannot decide it during a run, having no plain decode beside it.

The reference is a plain decoding run (drafter none) of the same conversation: same
backend, model, prompts, seed and sampling. Greedy speculative output must equal it token
for token, and a difference is a `lossless` failure; a sampled run can only be compared in
distribution, which one log cannot do.
"""

from dataclasses import dataclass
from typing import Any

from eventlog.postmortem.advice import ADVICE, CAUSE_ADVICE, Cause
from eventlog.postmortem.finding import Finding, Kind, Severity
from eventlog.turns import TurnRecord
from fsm.invariants import Invariant

# Settings that change how tokens are produced, not which: they may differ.
_FREE = frozenset({
    "drafter", "draft_max", "draft_min", "ngram_n", "ngram_min_hits", "acceptance", "strategy",
    "eog_policy", "replay_policy", "draft_model", "draft_checkpoints", "livelock_guard",
    "audit", "strict", "ctx_checkpoints", "ctx_checkpoint_every", "profile", "schedule",
})


def reference_problem(config: dict[str, Any], reference: dict[str, Any]) -> str | None:
    """Why `reference` cannot serve as the plain reference of `config`; None if it can."""
    if reference.get("drafter") != "none":
        return f"its drafter is '{reference.get('drafter')}', not 'none'"
    differ = sorted(k for k in config.keys() | reference.keys()
                    if k not in _FREE and config.get(k) != reference.get(k))
    if differ:
        shown = ", ".join(f"{k}={reference.get(k)!r} vs {config.get(k)!r}" for k in differ[:4])
        return f"it differs in {shown}"
    return None


@dataclass(frozen=True)
class _FirstDifference:
    """The first turn (by slot, turn) whose answer differs, and where in it."""

    key: tuple[int, int]
    at: int
    expected: int | None
    actual: int | None
    expected_len: int
    actual_len: int
    seq: int
    last_seq: int


class OutputCheck:
    """Compares answers turn by turn as the two sessions' turns are paired (`TurnPairs`),
    keeping only the counts and the first difference: a long session's memory stays flat."""

    def __init__(self) -> None:
        self.compared = 0
        self.differing = 0
        self._first: _FirstDifference | None = None

    def pair(self, key: tuple[int, int], turn: TurnRecord | None,
             ref: TurnRecord | None) -> None:
        """One turn of the session beside the reference's (a turn only one has is skipped)."""
        if turn is None or ref is None:
            return
        self.compared += 1
        got, want = turn.answer, ref.answer
        if got == want:
            return
        self.differing += 1
        if self._first is None or key < self._first.key:
            at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                      min(len(got), len(want)))
            self._first = _FirstDifference(
                key, at, want[at] if at < len(want) else None,
                got[at] if at < len(got) else None, len(want), len(got), turn.seq_of(at),
                turn.last_seq)

    def finding(self, reference_id: int, config: dict[str, Any]) -> Finding | None:
        """A finding when any visible answer differed from the reference's."""
        first = self._first
        if first is None:
            return None
        slot, turn = first.key
        sampled = float(config.get("temperature", 0.0) or 0.0) > 0
        numbers = {
            "reference": reference_id, "turns_compared": self.compared,
            "turns_differing": self.differing,
            "first": {"slot": slot, "turn": turn, "token_index": first.at,
                      "expected": first.expected, "actual": first.actual,
                      "expected_len": first.expected_len, "actual_len": first.actual_len},
            "sampled": sampled,
        }
        text = (f"{self.differing} of {self.compared} turn(s) answer differently from the "
                f"non-speculative reference session {reference_id}; first in turn {turn} "
                f"(slot {slot}) at answer token {first.at}: expected {first.expected}, got "
                f"{first.actual}.")
        if sampled:
            text += (" The run samples (temperature > 0), so token-level differences are "
                     "expected; only the distribution must match.")
            return Finding(Kind.OUTPUT_MISMATCH, Severity.INFO, first.seq, first.seq, text,
                           CAUSE_ADVICE[Cause.SAMPLED], numbers, slot, turn)
        numbers["invariant"] = Invariant.LOSSLESS.value
        return Finding(
            Kind.OUTPUT_MISMATCH, Severity.ERROR, first.seq, first.last_seq,
            f"Invariant {Invariant.LOSSLESS} failed: {text}",
            ADVICE[Kind.OUTPUT_MISMATCH].format(reference=reference_id),
            numbers, slot, turn)
