"""Acceptance inflated by the replays of speculative-checkpoint restores (llama.cpp PR 26320).

After a partial acceptance on a FULL-rollback target, llama-server restores its speculative
checkpoint and submits the accepted drafts and the target's correction again as the next
"draft"; that replay is accepted whole, and builds before PR 26320 count its correction
token as one more accepted draft: the task's `n_accepted` exceeds its rounds' by exactly
one per restore followed by a replay. The oldest such builds (llama-cpp-python 0.3.21) count
a restored round at its replay alone (its drafts generated, all of them accepted): the
drafts the first verification rejected are never counted, so `generated` falls short of
the rounds' drafts by those. The per-round verdict line (`accepted a/k draft tokens`) and the
answer's `timings` repeat the inflated counts; the mean accepted length follows from them.

A turn is named when its print_timing `accepted` exceeds the rounds' by its replay count,
and every other counter disagreement of the turn is that same surplus seen elsewhere: the
counter mismatches it explains are then not reported again as `engine_counter_mismatch`.
"""

from dataclasses import dataclass, field
from typing import Any

from eventlog.postmortem.advice import ADVICE
from eventlog.postmortem.detector import ROUND, SEQ, SLOT, TURN, Handler, Row, examples
from eventlog.postmortem.finding import Finding, Kind, Noted, Severity
from fsm.payloads import EndTurn, InvariantViolation, Replay, Verify
from fsm.states import Trigger

MEAN_TOLERANCE = 0.005 + 1e-9  # print_timing prints the mean length with 2 decimals
_EXAMPLES = 10  # turns quoted


@dataclass(slots=True)
class _Turn:
    """What one turn of one slot showed: its speculative rounds, its replays (per round:
    how many, how many drafts they verified again) and its counter mismatches."""

    slot: int
    turn: int
    spec_rounds: int = 0
    drafted: dict[int, int] = field(default_factory=dict)  # round -> its first verify's
    replays: dict[int, int] = field(default_factory=dict)  # round -> replays
    replayed: int = 0  # drafts the replays verified again (their batches less one each)
    rejected: int = 0  # drafts the restored rounds' first verifications rejected
    counters: list[Noted] = field(default_factory=list)

    @property
    def restores(self) -> int:
        """Restores followed by a replay."""
        return sum(self.replays.values())


def is_counter_mismatch(v: InvariantViolation) -> bool:
    """Whether `v` is an imported engine's own counter disagreeing with its rounds (such
    a violation names the counter's `source`), not a slot out of step."""
    return "source" in v["details"]


def _diff(v: InvariantViolation) -> float | None:
    """engine - ledger of a numeric counter mismatch, else None."""
    engine, ledger = v["details"].get("engine"), v["details"].get("ledger")
    if isinstance(engine, (int, float)) and isinstance(ledger, (int, float)):
        return engine - ledger
    return None


class AcceptanceInflation:
    """Per turn, whether the engine's counter mismatches are the replays' surplus."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.turns: dict[tuple[int, int], _Turn] = {}
        self.named: list[tuple[int, int, dict[str, Any]]] = []  # (seqs, numbers) per turn
        self.explained: set[int] = set()  # the seqs of the mismatches named turns explain

    def handlers(self) -> dict[Trigger, Handler]:
        """Speculative rounds (their first verification), replays, counter mismatches and
        each turn's end."""
        return {Trigger.VERIFY: self._on_verify, Trigger.REPLAY: self._on_replay,
                Trigger.INVARIANT_VIOLATION: self._on_violation,
                Trigger.END_TURN: self._on_end_turn}

    def _turn(self, row: Row) -> _Turn:
        key = (row[SLOT], row[TURN])
        turn = self.turns.get(key)
        if turn is None:
            turn = self.turns[key] = _Turn(row[SLOT], row[TURN])
        return turn

    def _on_verify(self, row: Row, verify: Verify) -> None:
        turn = self._turn(row)
        turn.spec_rounds += 1
        turn.drafted[row[ROUND]] = verify.get("drafted", 0)

    def _on_replay(self, row: Row, replay: Replay) -> None:
        if replay.get("mode") != "reverify":
            return  # our own engine's reconstruction: no counter of its own to inflate
        turn = self._turn(row)
        replayed = max(0, replay["tokens"] - 1)
        if row[ROUND] not in turn.replays:  # the first replay: what the verify rejected
            turn.rejected += max(0, turn.drafted.get(row[ROUND], 0) - replayed)
        turn.replays[row[ROUND]] = turn.replays.get(row[ROUND], 0) + 1
        turn.replayed += replayed

    def _on_violation(self, row: Row, v: InvariantViolation) -> None:
        if is_counter_mismatch(v):
            self._turn(row).counters.append(Noted(*row[:4], v))

    def _on_end_turn(self, row: Row, end: EndTurn) -> None:
        turn = self.turns.pop((row[SLOT], row[TURN]), None)
        if turn is None or not turn.counters or not turn.replays:
            return
        metrics = end["metrics"]
        core = next((n for n in turn.counters if n.detail["details"]["check"]
                     == "accepted tokens" and n.detail["details"]["source"] == "print_timing"),
                    None)
        if core is None or _diff(core.detail) != turn.restores:
            return
        explained = [n for n in turn.counters if self._explains(turn, n)]
        engine_acc = core.detail["details"]["engine"]
        drafted = metrics.get("drafted") or 0
        generated = next((n.detail["details"]["engine"] for n in turn.counters
                          if n.detail["details"]["check"] == "drafted tokens"
                          and n in explained), drafted)
        ledger_acc = core.detail["details"]["ledger"]
        points = (100 * (engine_acc / generated - ledger_acc / drafted)
                  if generated and drafted else 0.0)
        first_round = min(turn.replays)
        self.explained.update(n.seq for n in explained)
        self.named.append((core.seq, row[SEQ], {
            "slot": turn.slot, "turn": turn.turn, "round": first_round,
            "engine_accepted": engine_acc, "engine_generated": generated,
            "rounds_accepted": ledger_acc, "rounds_drafted": drafted,
            "restores": turn.restores, "replayed_tokens": turn.replayed,
            "inflation_points": round(points, 2),
            "rejected_uncounted": drafted - generated}))

    @staticmethod
    def _explains(turn: _Turn, noted: Noted) -> bool:
        """Whether one counter mismatch of a named turn is the replays' surplus."""
        details = noted.detail["details"]
        check, diff = details["check"], _diff(noted.detail)
        if check in ("accepted tokens", "draft_n_accepted"):
            return diff == turn.restores
        if check in ("drafted tokens", "draft_n"):
            return diff == -turn.rejected
        if check == "mean accepted length":
            return (diff is not None and turn.spec_rounds > 0
                    and abs(diff - turn.restores / turn.spec_rounds) <= MEAN_TOLERANCE)
        if check == "round verdict":
            engine, ledger = details["engine"], details["ledger"]
            return (noted.round in turn.replays and engine[0] - ledger[0] == 1
                    and engine[1] >= ledger[1])
        return False

    def finish(self) -> list[Finding]:
        """One finding for the session: its first inflated turn, every turn quoted."""
        if not self.named:
            return []
        first_seq, _, numbers = self.named[0]
        last_seq = self.named[-1][1]
        total = sum(n["restores"] for _, _, n in self.named)
        generated = f"{numbers['engine_accepted']}/{numbers['engine_generated']}"
        if numbers["rejected_uncounted"]:
            generated += (f" (generated leaves out the {numbers['rejected_uncounted']} drafts "
                          f"the restored rounds' first verifications rejected)")
        return [Finding(
            Kind.ACCEPTANCE_INFLATION, Severity.ERROR, first_seq, last_seq,
            f"llama-server counts the correction token of each checkpoint restore's replay "
            f"as an accepted draft (llama.cpp PR 26320): in turn {numbers['turn']} it reports "
            f"{generated} accepted, the rounds accepted {numbers['rounds_accepted']}/"
            f"{numbers['rounds_drafted']}; {numbers['restores']} restore(s) followed by a "
            f"replay inflate the acceptance rate by {numbers['inflation_points']:.2f} "
            f"points. {len(self.named)} turn(s), {total} restore(s) in all.",
            ADVICE[Kind.ACCEPTANCE_INFLATION],
            {**numbers, "turns_affected": len(self.named), "restores_total": total,
             "turns": examples([n for _, _, n in self.named], _EXAMPLES)},
            numbers["slot"], numbers["turn"], numbers["round"])]
