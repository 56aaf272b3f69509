"""Turns of two streams side by side, as the one fold (eventlog/fold.py) closes them: what a
diff and a postmortem against a reference compare."""

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from eventlog.fold import fold_log
from eventlog.records import TurnKey, TurnRecord
from fsm.event import Event


class Folds(Protocol):
    """Anything that takes events one at a time: a `LogFold`, a token diff's `PromptTap`."""

    def apply(self, ev: Event) -> None:
        """Take one event."""


def folded(events: Iterable[Event], fold: Folds) -> Iterator[Event]:
    """`events`, each folded into `fold` as it passes."""
    apply = fold.apply
    for ev in events:
        apply(ev)
        yield ev


def fold_turns(events: Iterable[Event]) -> dict[TurnKey, TurnRecord]:
    """Every turn of the events, keyed by (slot, turn)."""
    return fold_log(events).records


PairFn = Callable[[TurnKey, TurnRecord | None, TurnRecord | None], None]


class TurnPairs:
    """The turns of two streams (sides 0 and 1), handed to `on_pair` as soon as both sides
    have closed one, so that only turns still open or one-sided are held. Feed each side's
    `LogFold` with `closer(side)` as its `on_close`."""

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
