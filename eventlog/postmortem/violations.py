"""Everything else the engine itself flagged: the invariant violations no other detector
explains (bookkeeping, forward progress, draft state), failed runs and logs that end
mid-session. Lossless (invariant 4) needs a plain reference: reference.py decides it."""

from typing import Any

from eventlog.postmortem.detector import SEQ, Handler, Row, examples
from eventlog.postmortem.finding import Finding, Kind, Noted, Severity
from fsm.invariants import Invariant
from fsm.payloads import Fail, InvariantViolation
from fsm.states import Trigger

_EXAMPLES = 5  # violations quoted per invariant

# Explained with their cause by the EOG and contamination detectors.
_EXPLAINED = {Invariant.SLOT_PREFIX.value, Invariant.STATE_TRUTH.value}

_FIX = {
    Invariant.BOOKKEEPING.value: "Keep KV length, state position and slot length in step at "
                                 "commit; drop context checkpoints beyond a trimmed slot.",
    Invariant.FORWARD_PROGRESS.value: "Every round must commit at least one token (the "
                                      "target's own).",
    Invariant.DRAFT_STATE.value: "Checkpoint and restore the draft model's own state with the "
                                 "target's (a recurrent draft has the same problem).",
}


class Violations:
    """Groups the remaining violations by invariant; notes FAIL events."""

    def __init__(self, config: dict[str, Any]) -> None:
        # Per invariant: its first events (the examples), how many, and the last seq; not
        # every violation, so a long session's memory stays flat.
        self.by_invariant: dict[str, tuple[list[Noted], int, int]] = {}
        self.failures: list[Noted] = []

    def handlers(self) -> dict[Trigger, Handler]:
        """Violations and failures."""
        return {Trigger.INVARIANT_VIOLATION: self._on_violation, Trigger.FAIL: self._on_fail}

    def _on_fail(self, row: Row, fail: Fail) -> None:
        self.failures.append(Noted(*row[:4], fail))

    def _on_violation(self, row: Row, v: InvariantViolation) -> None:
        name = v["invariant"]
        if name not in _EXPLAINED:
            firsts, count, _ = self.by_invariant.get(name, ([], 0, 0))
            if len(firsts) < _EXAMPLES:
                firsts.append(Noted(*row[:4], v))
            self.by_invariant[name] = (firsts, count + 1, row[SEQ])

    def finish(self) -> list[Finding]:
        """One finding per invariant, one per failure."""
        out = []
        for name, (evs, count, last_seq) in self.by_invariant.items():
            first = evs[0]
            v: InvariantViolation = first.detail
            out.append(Finding(
                Kind.INVARIANT_VIOLATION, Severity.ERROR, first.seq, last_seq,
                f"Invariant {name} failed {count} time(s); first: "
                f"{v['message']}",
                _FIX.get(name, "See the invariant's definition in docs/design.md#invariants."),
                {"invariant": name, "count": count,
                 "first": examples([{"seq": e.seq, "turn": e.turn, "round": e.round,
                                     **e.detail["details"]} for e in evs],
                                   _EXAMPLES)},
                first.slot, first.turn, first.round))
        for ev in self.failures:
            fail: Fail = ev.detail
            out.append(Finding(
                Kind.RUN_FAILED, Severity.ERROR, ev.seq, ev.seq,
                f"The run failed in turn {ev.turn} round {ev.round} (slot {ev.slot}): "
                f"{fail['error']}",
                "Fix the error above; the log holds every whole round before it.",
                {"error": fail["error"]}, ev.slot, ev.turn, ev.round))
        return out
