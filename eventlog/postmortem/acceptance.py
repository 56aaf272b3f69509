"""Acceptance-collapse streaks: runs of speculative rounds in which no draft survived.

Each such round pays a (k+1)-token verification and, under `checkpoint`, a restore and
replay, to commit the one token a plain step would have given. llama.cpp resets its
n-gram drafter on a low-acceptance streak (PR 22168) for this reason.
"""

from dataclasses import dataclass
from typing import Any

from eventlog.postmortem.advice import ADVICE
from eventlog.postmortem.detector import (
    DURATION,
    ROUND,
    SEQ,
    SLOT,
    TURN,
    Handler,
    Row,
    examples,
)
from eventlog.postmortem.finding import Finding, Kind, Severity
from fsm.payloads import Commit, Verify
from fsm.states import Trigger

T = Trigger
MIN_STREAK = 8
"""Consecutive zero-acceptance rounds that make a streak worth reporting."""


@dataclass(slots=True)
class _Streak:
    slot: int
    turn: int
    round: int
    first_seq: int
    last_seq: int = 0
    rounds: int = 0
    drafted: int = 0
    verify_s: float = 0.0


class AcceptanceCollapse:
    """Per slot, the current run of zero-acceptance rounds; rounds without a draft neither
    extend nor break it."""

    def __init__(self, config: dict[str, Any], min_streak: int = MIN_STREAK) -> None:
        self.drafter = config.get("drafter", "?")
        self.min_streak = min_streak
        self._verify: dict[int, tuple[int, float, int]] = {}
        self._streak: dict[int, _Streak] = {}
        self.streaks: list[_Streak] = []
        self.drafted = 0
        self.accepted = 0

    def handlers(self) -> dict[Trigger, Handler]:
        """VERIFY opens a round's draft, COMMIT judges it, END_TURN closes the streak.

        Closures over the per-slot dicts: every round's VERIFY and COMMIT come here, and
        most commits accept a draft with no streak open, so that case returns first."""
        pending = self._verify
        streaks = self._streak

        def on_verify(row: Row, verify: Verify) -> None:
            pending[row[SLOT]] = (verify["drafted"], row[DURATION], row[SEQ])

        def on_commit(row: Row, commit: Commit) -> None:
            slot = row[SLOT]
            draft = pending.pop(slot, None)
            if draft is None or not draft[0]:
                return
            k, verify_s, first = draft
            accepted = commit["accepted"]
            self.drafted += k
            self.accepted += accepted
            if accepted:
                if slot in streaks:
                    self._close(slot)
                return
            s = streaks.get(slot)
            if s is None:
                s = streaks[slot] = _Streak(slot, row[TURN], row[ROUND], first)
            s.rounds += 1
            s.drafted += k
            s.verify_s += verify_s
            s.last_seq = row[SEQ]

        return {T.VERIFY: on_verify, T.COMMIT: on_commit,
                T.END_TURN: lambda row, _: self._close(row[SLOT])}

    def _close(self, slot: int) -> None:
        s = self._streak.pop(slot, None)
        if s is not None and s.rounds >= self.min_streak:
            self.streaks.append(s)

    def finish(self) -> list[Finding]:
        """A warning when any streak reached `min_streak` rounds."""
        for slot in list(self._streak):
            self._close(slot)
        if not self.streaks:
            return []
        s = self.streaks
        longest = max(s, key=lambda x: x.rounds)
        wasted = sum(x.drafted for x in s)
        rate = self.accepted / self.drafted if self.drafted else 0.0
        return [Finding(
            Kind.ACCEPTANCE_COLLAPSE, Severity.WARNING, s[0].first_seq, s[-1].last_seq,
            f"{len(s)} streak(s) of at least {self.min_streak} consecutive rounds accepted no "
            f"draft (longest: {longest.rounds} rounds in turn {longest.turn}, slot "
            f"{longest.slot}); {wasted} drafted tokens were verified for nothing, "
            f"{sum(x.verify_s for x in s):.3f} s of verification. Session acceptance "
            f"{rate:.1%} (drafter {self.drafter}).",
            ADVICE[Kind.ACCEPTANCE_COLLAPSE],
            {"streaks": len(s), "longest": longest.rounds,
             "rounds": sum(x.rounds for x in s), "drafted_wasted": wasted,
             "verify_s": round(sum(x.verify_s for x in s), 6), "acceptance": round(rate, 4),
             "min_streak": self.min_streak, "drafter": self.drafter,
             "per_streak": examples([{"slot": x.slot, "turn": x.turn, "round": x.round,
                                      "seq": [x.first_seq, x.last_seq], "rounds": x.rounds}
                                     for x in s])},
            s[0].slot, s[0].turn, s[0].round)]
