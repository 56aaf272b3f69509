"""Projection: each slot's state at any sequence number, without a model: the one fold
(eventlog/fold.py) with its turns let go as they close."""

from collections.abc import Iterable

from sqlalchemy import Engine

from eventlog.fold import LogFold, fold_session
from eventlog.reader import last_events, last_seq
from eventlog.records import SlotView, TurnRecord
from fsm.event import Event
from fsm.states import Trigger


def _let_go(rec: TurnRecord) -> None:
    """A closed turn is no part of any slot's state."""


class Projector(LogFold):
    """Folds events one at a time into `slots` (slot number -> `SlotView`), in place,
    keeping only the turns still open."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(on_close=_let_go)


def project(events: Iterable[Event], at: int | None = None) -> dict[int, SlotView]:
    """Each slot's view after the events through seq `at` (inclusive), or after all of them."""
    projector = Projector()
    apply = projector.apply
    for event in events:
        if at is not None and event.seq > at:
            break
        apply(event)
    return projector.slots


SLOT_TRIGGERS = frozenset({
    Trigger.START_TURN, Trigger.PREFILL, Trigger.CTX_RESTORE, Trigger.BEGIN, Trigger.VERIFY,
    Trigger.DECODE, Trigger.RESTORE, Trigger.LIVELOCK, Trigger.COMMIT,
    Trigger.INVARIANT_VIOLATION, Trigger.END_TURN})
"""The triggers that change a slot's view beyond its state, turn and round, and END_TURN,
where the fold lets a turn go."""


def project_session(engine: Engine, session_id: int, at: int | None = None) -> Projector:
    """The stored session projected through seq `at` (inclusive), or through its end. Only
    the events of `SLOT_TRIGGERS` are read, half of a long session's, and not their times;
    each slot's state, turn and round are then its latest event's, and the projector's
    `seq` the latest."""
    if at is None:  # one bound for both reads, should the session still be growing
        at = last_seq(engine, session_id)
    projector = Projector()
    fold_session(engine, session_id, projector, upto_seq=at, triggers=SLOT_TRIGGERS,
                 timings=False)
    for slot, (seq, turn, rnd, state) in last_events(engine, session_id, projector.slots,
                                                      at).items():
        view = projector.slots[slot]
        view.turn, view.round, view.state = turn, rnd, state
        projector.seq = max(projector.seq, seq)
    return projector
