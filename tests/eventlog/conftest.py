"""Fixtures of the event-log tests: a fresh database and realistic rounds of events."""

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine

from eventlog import create_session, open_db
from fsm.event import Event
from fsm.states import RoundState, Trigger

UNIT = 6
"""Events per round from `make_rounds`."""

MakeRounds = Callable[..., list[Event]]


def _round(rnd: int) -> list[Event]:
    """Round `rnd`: a rejected-then-restored round of `UNIT` events, seqs from UNIT * rnd."""
    first_seq = UNIT * rnd
    s = RoundState
    steps = [
        (Trigger.BEGIN, s.IDLE, s.CHECKPOINT, {"strategy": "checkpoint"}),
        (Trigger.DRAFT, s.CHECKPOINT, s.SPECULATE, {"drafts": [7, 8, 9, rnd]}),
        (Trigger.VERIFY, s.SPECULATE, s.VERIFY, {"drafts": [7, 8, 9, rnd], "drafted": 4}),
        (Trigger.REJECT, s.VERIFY, s.REJECT, {"accepted": 2, "bytes": 1.5e6}),
        (Trigger.RESTORE, s.REJECT, s.RESTORE, {"reason": "partial accept ✓", "x": None}),
        (
            Trigger.COMMIT,
            s.RESTORE,
            s.COMMIT,
            {"append": [7, 8, rnd], "position": 3 * rnd + 2, "digest": f"d{rnd:08x}"},
        ),
    ]
    return [
        Event(first_seq + i, 0, 0, rnd, trig, src, dst, 0.01 * (first_seq + i), 0.001, p)
        for i, (trig, src, dst, p) in enumerate(steps)
    ]


@pytest.fixture
def make_rounds() -> MakeRounds:
    """`make_rounds(n, start=0)`: the events of rounds start..start+n-1, in seq order."""

    def make(n: int, start: int = 0) -> list[Event]:
        return [e for rnd in range(start, start + n) for e in _round(rnd)]

    return make


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """A writer engine on a fresh database (SQLite and PostgreSQL: see tests/conftest.py)."""
    engine = open_db(db_url, True)
    yield engine
    engine.dispose()


@pytest.fixture
def session_id(engine: Engine) -> int:
    """A fresh `running` session."""
    return create_session(
        engine,
        config={"strategy": "checkpoint", "draft_max": 4, "nested": {"k": [1, 2]}},
        backend="sim",
        seeds={"run": 7},
        code_version="test",
    )
