"""Projection: each slot's state at any sequence number, without a model: the one fold
(eventlog/fold.py) with its turns let go as they close."""

from collections.abc import Iterable

from eventlog.fold import LogFold, SlotView, TurnRecord
from fsm.event import Event


def _let_go(rec: TurnRecord) -> None:
    """A closed turn is no part of any slot's state."""


class Projector(LogFold):
    """Folds events one at a time into `slots` (slot number -> `SlotView`), in place,
    keeping only the turns still open."""

    def __init__(self) -> None:
        super().__init__(on_close=_let_go)


def project(events: Iterable[Event], at: int | None = None) -> dict[int, SlotView]:
    """Each slot's view after the events through seq `at` (inclusive), or after all of them."""
    projector = Projector()
    apply = projector.apply
    if at is None:
        for event in events:
            apply(event)
    else:
        for event in events:
            if event.seq > at:
                break
            apply(event)
    return projector.slots
