"""What the one fold (eventlog/fold.py) folds a session's events into: each slot's view
and each turn's record, with the turn's metrics as counted from its events."""

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from fsm.draft_profile import DraftProfile, Reported
from fsm.states import RoundState
from fsm.turn_counts import TurnCounts


@dataclass(slots=True)
class SlotView:
    """One slot after the events folded so far: its committed `tokens`, the `position`
    its state has consumed (docs/design.md#positions) and the state's `digest` there; the
    session's rounds (commits), drafted and accepted tokens, restores, context restores
    and re-prefilled tokens so far, and its invariant-violation payloads."""

    slot: int
    tokens: list[int] = field(default_factory=list)
    position: int = 0
    state: RoundState = RoundState.IDLE
    digest: str = ""
    turn: int = 0
    round: int = 0
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    restores: int = 0
    ctx_restores: int = 0
    reprefill_tokens: int = 0
    violations: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class TurnRecord:
    """One turn of one slot: every token it appended after its prompt (`committed`, stray
    tokens included), END_TURN's `metrics` (None while open) and the same counted
    (`stats`), one (drafted, accepted) per round that asked the drafter, the rounds' step
    seconds by phase (`eventlog.fold.PHASES`) and the rounds that verified drafts; then
    the fold's own fields."""

    slot: int
    turn: int
    committed: list[int] = field(default_factory=list)
    metrics: dict[str, Any] | None = None
    first_seq: int = 0
    last_seq: int = 0
    events: int = 0  # how many of the session's events are the turn's
    marks: list[tuple[int, int]] = field(default_factory=list)  # (tokens so far, seq)
    stats: TurnCounts = field(default_factory=TurnCounts)
    drafts: list[tuple[int, int]] = field(default_factory=list)
    phase_s: dict[str, float] = field(default_factory=dict)
    verifies: int = 0
    t: float = 0.0  # the time of the turn's latest event
    round_no: int = 0
    round_t: float = 0.0  # when the round began: the time of the event before it
    round_k: int = -1  # the round's draft size at its first verification; -1: no draft
    round_eog: int | None = None  # where the latest verdict saw an EOG in the block
    rollback_t: float | None = None  # when the rollback in progress began
    prefill_from: int | None = None  # where the turn's prefill began
    answer_end: int | None = None  # committed tokens through the first EOG

    def seq_of(self, index: int) -> int:
        """The seq of the event that committed `committed[index]`."""
        i = bisect_right(self.marks, (index, float("inf")))
        return self.marks[i][1] if i < len(self.marks) else self.last_seq

    @property
    def answer(self) -> list[int]:
        """The visible answer: the committed tokens through the EOG, which the engine
        counted as `generated_tokens` (the log does not name the EOG ids itself)."""
        if self.metrics is None:
            return list(self.committed)
        return self.committed[: self.metrics.get("generated_tokens", len(self.committed))]

    @property
    def profile(self) -> DraftProfile:
        """The turn's speculative rounds (those that verified drafts) as a profile; a turn
        whose rounds are not in its log, with the engine's own figures its END_TURN
        carries."""
        rounds = [r for r in self.drafts if r[0] > 0]
        m = self.metrics
        if rounds or not m or ("mean_accept_len" not in m and "acc_per_pos" not in m):
            return DraftProfile(rounds)
        return DraftProfile(rounds, Reported(m.get("mean_accept_len"), m.get("acc_per_pos")))
