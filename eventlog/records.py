"""What the one fold (eventlog/fold.py) folds a session's events into: each slot's view
and each turn's record, with the turn's metrics as counted from its events."""

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

from fsm.draft_profile import DraftProfile, Reported
from fsm.states import RoundState
from fsm.turn_metrics import TurnMetrics

TurnKey = tuple[int, int]
"""A turn's (slot, turn)."""

SUMMED = ("rounds", "drafted", "accepted", "restores", "ctx_restores", "reprefill_tokens")
"""The turn counts a slot's view sums over the slot's turns."""


def _summed(name: str) -> property:
    def total(view: "SlotView") -> int:
        return getattr(view.earlier, name) + getattr(view.latest, name)

    return property(total, doc=f"The slot's `{name}` so far, its turns' summed.")


@dataclass(slots=True, eq=False)
class SlotView:
    """One slot after the events folded so far: its committed `tokens`, the `position`
    its state has consumed (docs/design.md#positions) and the state's `digest` there, and
    its invariant-violation payloads; and the session's rounds (commits), drafted and
    accepted tokens, restores, context restores and re-prefilled tokens so far, summed
    from the turn counts the fold keeps (`latest`: the slot's latest turn's, `earlier`:
    those of the turns before it)."""

    slot: int
    tokens: list[int] = field(default_factory=list)
    position: int = 0
    state: RoundState = RoundState.IDLE
    digest: str = ""
    turn: int = 0
    round: int = 0
    violations: list[dict[str, Any]] = field(default_factory=list)
    latest: TurnMetrics = field(default_factory=TurnMetrics, repr=False)
    earlier: TurnMetrics = field(default_factory=TurnMetrics, repr=False)

    rounds = _summed("rounds")
    drafted = _summed("drafted")
    accepted = _summed("accepted")
    restores = _summed("restores")
    ctx_restores = _summed("ctx_restores")
    reprefill_tokens = _summed("reprefill_tokens")

    def __eq__(self, other: object) -> bool:
        """Equal views show the same slot: the same facts and sums (whatever else the
        turns they sum counted, such as times)."""
        return isinstance(other, SlotView) and self._shown() == other._shown()

    def _shown(self) -> tuple[Any, ...]:
        return (self.slot, self.tokens, self.position, self.state, self.digest, self.turn,
                self.round, self.violations, *(getattr(self, name) for name in SUMMED))

    def next_turn(self, counts: TurnMetrics) -> None:
        """The slot's latest turn is over: `counts` are its next one's."""
        earlier, latest = self.earlier, self.latest
        for name in SUMMED:
            setattr(earlier, name, getattr(earlier, name) + getattr(latest, name))
        self.latest = counts


@dataclass(slots=True)
class TurnRecord:
    """One turn of one slot: every token it appended after its prompt (`committed`, stray
    tokens included), END_TURN's `metrics` (None while open) and the same counted
    (`stats`, complete at every event), one (drafted, accepted) per round that asked the
    drafter, the rounds' step seconds by phase (`eventlog.fold.PHASES`) and the rounds
    that verified drafts; where its events lie in the session's (`first_seq`, `last_seq`,
    how many `events`) and which event committed which tokens (`marks`)."""

    slot: int
    turn: int
    committed: list[int] = field(default_factory=list)
    metrics: dict[str, Any] | None = None
    first_seq: int = 0
    last_seq: int = 0
    events: int = 0
    marks: list[tuple[int, int]] = field(default_factory=list)  # (tokens so far, seq)
    stats: TurnMetrics = field(default_factory=TurnMetrics)
    drafts: list[tuple[int, int]] = field(default_factory=list)
    phase_s: dict[str, float] = field(default_factory=dict)
    verifies: int = 0

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
