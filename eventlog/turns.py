"""What each turn produced, folded from the log: the committed answer and the metrics the
engine recorded at the turn's end."""

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
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


def folded(events: Iterable[Event], folder: TurnFolder) -> Iterator[Event]:
    """`events`, each folded into `folder` as it passes."""
    apply = folder.apply
    for ev in events:
        apply(ev)
        yield ev


def fold_turns(events: Iterable[Event]) -> dict[tuple[int, int], TurnRecord]:
    """Every turn of the events, keyed by (slot, turn)."""
    folder = TurnFolder()
    for ev in events:
        folder.apply(ev)
    return folder.records


TurnKey = tuple[int, int]
PairFn = Callable[[TurnKey, TurnRecord | None, TurnRecord | None], None]


class TurnPairs:
    """The turns of two streams (sides 0 and 1), handed to `on_pair` as soon as both sides
    have closed one, so that only turns still open or one-sided are held. Feed each side's
    `TurnFolder` with `closer(side)` as its `on_close`."""

    def __init__(self, on_pair: PairFn) -> None:
        self.closed = [0, 0]
        self._on_pair = on_pair
        self._waiting: tuple[dict[TurnKey, TurnRecord], ...] = ({}, {})

    def closer(self, side: int) -> Callable[[TurnRecord], None]:
        """The `on_close` of one side."""

        def close(rec: TurnRecord) -> None:
            self.closed[side] += 1
            key = (rec.slot, rec.turn)
            other = self._waiting[1 - side].pop(key, None)
            if other is None:
                self._waiting[side][key] = rec
            else:
                self._on_pair(key, *((other, rec) if side else (rec, other)))

        return close

    def catch_up(self, side: int, events: Iterator[Event]) -> None:
        """Read `side`'s stream on until it has closed as many turns as the other side."""
        while self.closed[side] < self.closed[1 - side] and next(events, None) is not None:
            pass

    def finish(self, open_a: dict[TurnKey, TurnRecord],
               open_b: dict[TurnKey, TurnRecord]) -> None:
        """Hand over every turn left: waiting for the other side, or never closed."""
        a, b = {**self._waiting[0], **open_a}, {**self._waiting[1], **open_b}
        for key in sorted(a.keys() | b.keys()):
            self._on_pair(key, a.get(key), b.get(key))
