"""Per-turn measurements, the numbers a conversation-level benchmark needs, folded from the
events the turn fired."""

from dataclasses import asdict, dataclass
from typing import Any

from eventlog.fold import LogFold
from fsm.event import Event
from fsm.machine import EventSink
from fsm.turn_counts import TurnCounts


@dataclass
class TurnMetrics(TurnCounts):
    """One turn boundary of one slot. Times are on the backend's clock, in seconds.

    `kept_tokens` is the longest common prefix of the slot and the new prompt, and
    `f_keep` that over the slot's length (1.0 for an empty slot); `reprefill_tokens`
    counts history tokens processed a second time because the recurrent state had to
    fall back to an older context checkpoint.

    Conversation cost (docs/design.md#conversation-cost), `conversation_s`, sums three parts:
    generation (`generation_s`: decode time less rollbacks), state repair
    (`state_repair_s`: in-round rollbacks plus the context-checkpoint restore at the turn
    boundary, `repair_s`) and repeated prefill (`reprefill_s`: prefill time of the
    re-prefilled history). First-time prefill of new prompt tokens is in none of them:
    every policy pays it alike.
    """

    @property
    def decode_tps(self) -> float:
        """Generated tokens per second of decode time."""
        return self.generated_tokens / self.decode_s if self.decode_s > 0 else 0.0

    @property
    def acceptance(self) -> float:
        """Accepted over drafted tokens."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def generation_s(self) -> float:
        """Decode time spent producing tokens (rollbacks excluded)."""
        return self.decode_s - self.rollback_s

    @property
    def state_repair_s(self) -> float:
        """Time spent undoing state: in-round rollbacks and the turn's checkpoint restore."""
        return self.rollback_s + self.repair_s

    @property
    def conversation_s(self) -> float:
        """Conversation cost: generation + state repair + repeated prefill."""
        return self.generation_s + self.state_repair_s + self.reprefill_s

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping, with the derived rates."""
        return asdict(self) | {"decode_tps": self.decode_tps, "acceptance": self.acceptance}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TurnMetrics":
        """Inverse of `to_dict` (derived rates are recomputed)."""
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})


class TurnFold:
    """The session's events on their way to the journal, folded as they pass by the one
    fold (eventlog/fold.py): a turn's metrics are read from it, never counted beside it."""

    def __init__(self, journal: EventSink) -> None:
        # A recorder takes the turns this fold closes rather than fold the events again;
        # elsewhere a closed turn is dropped (END_TURN carried its metrics).
        closing = getattr(journal, "closing_turns", None)
        self._fold = LogFold(closing() if closing else lambda _: None, views=False)
        self._step, self._append = self._fold.step, journal.append  # bound once: per event

    def append(self, ev: Event) -> None:
        """Fold the event, then hand it to the journal."""
        self._step(ev.seq, ev.slot, ev.turn, ev.round, ev.trigger, ev.dest, ev.t, ev.duration,
                   ev.payload)
        self._append(ev)

    def metrics(self, slot: int) -> TurnMetrics:
        """The metrics of `slot`'s turn in progress, as its END_TURN records them."""
        return TurnMetrics(**asdict(self._fold.counts(slot)))
