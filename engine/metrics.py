"""Per-turn measurements, the numbers a conversation-level benchmark needs, folded from the
events the turn fired (the figures themselves: fsm/turn_metrics.py)."""

from dataclasses import replace

from eventlog.turn_fold import TurnsFold
from fsm.event import Event
from fsm.machine import EventSink
from fsm.turn_metrics import TurnMetrics


class TurnFold:
    """The session's events on their way to the journal, folded as they pass by the one
    fold's turns (eventlog/turn_fold.py): a turn's metrics are read from it, never counted
    beside it."""

    def __init__(self, journal: EventSink) -> None:
        # A recorder takes the turns this fold closes rather than fold the events again;
        # elsewhere a closed turn is dropped (END_TURN carried its metrics).
        closing = getattr(journal, "closing_turns", None)
        self._fold = TurnsFold(closing() if closing else lambda _: None)
        self._step, self._append = self._fold.step, journal.append  # bound once: per event

    def append(self, ev: Event) -> None:
        """Fold the event, then hand it to the journal."""
        self._step(ev.seq, ev.slot, ev.turn, ev.round, ev.trigger, ev.dest, ev.t, ev.duration,
                   ev.payload)
        self._append(ev)

    def metrics(self, slot: int) -> TurnMetrics:
        """The metrics of `slot`'s turn in progress, as its END_TURN records them (a copy:
        the fold goes on counting into its own)."""
        return replace(self._fold.counts(slot))
