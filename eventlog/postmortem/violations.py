"""Everything else the engine itself flagged: the invariant violations no other detector
explains (bookkeeping, forward progress, draft state), failed runs and logs that end
mid-session. Lossless (invariant 4) needs a plain reference: reference.py decides it.

An imported engine's own counters that disagree with the rounds its log shows (the
violations that name the counter's `source`: print_timing, an answer, a log line) are not
a slot out of step, and get their own finding and advice; those that are the surplus of
PR 26320's replayed corrections (`inflation.py`) are named there instead."""

from typing import Any

from eventlog.postmortem.advice import ADVICE, INVARIANT_ADVICE
from eventlog.postmortem.detector import Handler, Row, examples
from eventlog.postmortem.finding import Finding, Kind, Noted, Severity
from eventlog.postmortem.inflation import AcceptanceInflation, is_counter_mismatch
from fsm.invariants import Invariant
from fsm.payloads import Fail, InvariantViolation
from fsm.states import Trigger

_EXAMPLES = 5  # violations quoted per invariant

# Explained with their cause by the EOG and contamination detectors.
_EXPLAINED = {Invariant.SLOT_PREFIX.value, Invariant.STATE_TRUTH.value}


class Violations:
    """Groups the remaining violations by invariant; notes FAIL events. The engine's
    counter mismatches wait for the end: `inflation` may explain some of them."""

    def __init__(self, config: dict[str, Any], inflation: AcceptanceInflation) -> None:
        # Per invariant: its first events (the examples), how many, and the last seq; not
        # every violation, so a long session's memory stays flat. Counter mismatches come
        # from imported logs only, a few per turn.
        self.by_invariant: dict[str, tuple[list[Noted], int, int]] = {}
        self.counters: list[Noted] = []
        self.failures: list[Noted] = []
        self.inflation = inflation

    def handlers(self) -> dict[Trigger, Handler]:
        """Violations and failures."""
        return {Trigger.INVARIANT_VIOLATION: self._on_violation, Trigger.FAIL: self._on_fail}

    def _on_fail(self, row: Row, fail: Fail) -> None:
        self.failures.append(Noted(*row[:4], fail))

    def _on_violation(self, row: Row, v: InvariantViolation) -> None:
        if is_counter_mismatch(v):
            self.counters.append(Noted(*row[:4], v))
        elif v["invariant"] not in _EXPLAINED:
            self._count(v["invariant"], Noted(*row[:4], v))

    def _count(self, name: str, noted: Noted) -> None:
        firsts, count, _ = self.by_invariant.get(name, ([], 0, 0))
        if len(firsts) < _EXAMPLES:
            firsts.append(noted)
        self.by_invariant[name] = (firsts, count + 1, noted.seq)

    def finish(self) -> list[Finding]:
        """One finding per invariant, one for the engine's counter mismatches that
        `inflation` does not explain, one per failure."""
        out = []
        for name, (evs, count, last_seq) in self.by_invariant.items():
            first = evs[0]
            v: InvariantViolation = first.detail
            out.append(Finding(
                Kind.INVARIANT_VIOLATION, Severity.ERROR, first.seq, last_seq,
                f"Invariant {name} failed {count} time(s); first: {v['message']}",
                INVARIANT_ADVICE.get(name, ADVICE[Kind.INVARIANT_VIOLATION]),
                {"invariant": name, "count": count, "first": _quoted(evs)},
                first.slot, first.turn, first.round))
        counters = [n for n in self.counters if n.seq not in self.inflation.explained]
        if counters:
            first = counters[0]
            out.append(Finding(
                Kind.ENGINE_COUNTER_MISMATCH, Severity.ERROR, first.seq, counters[-1].seq,
                f"The engine's own counters disagree with the rounds its log shows "
                f"{len(counters)} time(s); first: {first.detail['message']}",
                ADVICE[Kind.ENGINE_COUNTER_MISMATCH],
                {"count": len(counters), "first": _quoted(counters)},
                first.slot, first.turn, first.round))
        for ev in self.failures:
            fail: Fail = ev.detail
            if fail.get("truncated"):
                continue  # a request the log cuts, or a server that died: server_log.py
            out.append(Finding(
                Kind.RUN_FAILED, Severity.ERROR, ev.seq, ev.seq,
                f"The run failed in turn {ev.turn} round {ev.round} (slot {ev.slot}): "
                f"{fail['error']}",
                ADVICE[Kind.RUN_FAILED],
                {"error": fail["error"]}, ev.slot, ev.turn, ev.round))
        return out


def _quoted(evs: list[Noted]) -> list[dict[str, Any]]:
    """The violations `evs` as a finding quotes them."""
    return examples([{"seq": e.seq, "turn": e.turn, "round": e.round, **e.detail["details"]}
                     for e in evs], _EXAMPLES)
