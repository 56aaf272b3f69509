"""What each turn produced, folded from the log: the committed answer and the metrics the
engine recorded at the turn's end."""

from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from fsm.event import APPEND, Event
from fsm.states import Trigger

_GENERATING = (Trigger.PREFILL, Trigger.COMMIT)


@dataclass(slots=True)
class TurnRecord:
    """One turn of one slot. `committed` holds every token the turn appended after its
    prompt (the prefill's first token and each round's block, stray tokens included);
    `metrics` is the END_TURN payload's metrics, None while the turn is open."""

    slot: int
    turn: int
    committed: list[int] = field(default_factory=list)
    metrics: dict[str, Any] | None = None
    first_seq: int = 0
    last_seq: int = 0
    marks: list[tuple[int, int]] = field(default_factory=list)  # (tokens so far, seq)

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


class TurnFolder:
    """Folds events into `records`, keyed by (slot, turn), in the order turns began. With
    `on_close`, a turn leaves `records` at its end and goes there instead, so a long
    session's folder holds only its open turns."""

    def __init__(self, on_close: Callable[[TurnRecord], None] | None = None) -> None:
        self.records: dict[tuple[int, int], TurnRecord] = {}
        self._on_close = on_close

    def apply(self, ev: Event) -> None:
        """Fold one event."""
        key = (ev.slot, ev.turn)
        rec = self.records.get(key)
        if rec is None:
            if ev.turn == 0:
                return  # nothing belongs to a turn before the first one starts
            rec = self.records[key] = TurnRecord(ev.slot, ev.turn, first_seq=ev.seq)
        rec.last_seq = ev.seq
        trigger = ev.trigger
        if trigger in _GENERATING:
            block = ev.payload.get(APPEND)
            if block:
                rec.committed.extend(block)
                rec.marks.append((len(rec.committed), ev.seq))
        elif trigger is Trigger.END_TURN:
            rec.metrics = ev.payload.get("metrics")
            if self._on_close is not None:
                self._on_close(self.records.pop(key))


def fold_turns(events: Iterable[Event]) -> dict[tuple[int, int], TurnRecord]:
    """Every turn of the events, keyed by (slot, turn)."""
    folder = TurnFolder()
    for ev in events:
        folder.apply(ev)
    return folder.records
