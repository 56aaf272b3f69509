"""Ctrl-C while a session is recorded: wherever it lands, the session ends `failed` with
whole rounds, and no connection is left holding the ledger's write lock."""

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from functools import partial
from types import FrameType
from typing import Any

import pytest
from sqlalchemy import Engine, select, text

import eventlog.db
import eventlog.unclosed
from eventlog import Recorder, SessionStatus, count_events, create_session, get_session, open_db
from eventlog.db import begin_waiting
from eventlog.interrupts import interrupts_deferred
from eventlog.schema import sessions
from eventlog.unclosed import fail_unclosed
from fsm.event import Event
from tests.eventlog.conftest import UNIT

MakeRounds = Callable[..., list[Event]]


def test_a_ctrl_c_inside_a_section_is_raised_where_it_ends() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), interrupts_deferred():
        signal.raise_signal(signal.SIGINT)
        done.append("after the signal")
    assert done == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_nested_sections_hold_it_until_the_outermost_ends() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), interrupts_deferred():
        with interrupts_deferred():
            signal.raise_signal(signal.SIGINT)
        done.append("outer body")
    assert done == ["outer body"]


def test_a_section_outside_the_main_thread_holds_nothing() -> None:
    handlers = []

    def body() -> None:
        with interrupts_deferred():
            handlers.append(signal.getsignal(signal.SIGINT))

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert handlers == [signal.default_int_handler]


_DATABASE_CODE = ("sqlalchemy/engine/", "sqlalchemy/pool/", "/eventlog/")
"""Where connections, transactions and the recorder's state change (SQLAlchemy builds its
statements elsewhere, touching nothing an interrupt could leave half done)."""


class _Interrupter:
    """A tracer that sends this process SIGINT at the `at`-th line executed in
    `_DATABASE_CODE` after it is installed: a Ctrl-C landing at one exact point of it.
    `where`: that line."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.lines = 0
        self.where = ""

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code.co_filename
        if not any(part in code for part in _DATABASE_CODE):
            return None  # not into this frame's lines (calls from it are traced anew)
        if event == "line" and not self.where:
            if self.lines == self.at:
                self.where = f"{code}:{frame.f_lineno}"
                signal.raise_signal(signal.SIGINT)
            self.lines += 1
        return self.trace


@pytest.fixture
def short_busy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Writers wait 2 s for the write lock, not 60: a lock an interrupt left held shows
    as a failure here instead of a test that hangs. And the sessions other tests left
    open in this process are not this test's to close."""
    monkeypatch.setattr(eventlog.db, "SQLITE_BUSY_S", 2.0)
    monkeypatch.setattr(eventlog.unclosed, "_open", {})
    yield


def _record_interrupted(engine: Engine, rounds: list[Event], at: int) -> tuple[int, int]:
    """Create a session and record `rounds` into it (a flush every 2 rounds), with SIGINT
    at the `at`-th line; clean up as the CLI does. The interrupt, once sent, reaches this
    caller (held to a write section's end, never dropped). (lines traced, the session id:
    0 when the interrupt came before create_session returned it)."""
    tracer = _Interrupter(at)
    sid = 0
    raised = False
    sys.settrace(tracer.trace)
    try:
        sid = create_session(engine, config={}, backend="sim", seeds={}, code_version="t")
        with Recorder(engine, sid, flush_events=2 * UNIT, flush_ms=1e9) as rec:
            for i, event in enumerate(rounds):
                rec.append(event)
                if i % UNIT == UNIT - 1:
                    rec.end_unit()
    except KeyboardInterrupt:
        sys.settrace(None)
        raised = True
        assert fail_unclosed() == []
    finally:
        sys.settrace(None)
    assert raised == bool(tracer.where), f"the Ctrl-C at {tracer.where} was lost"
    return tracer.lines, sid


def _assert_unlocked(engine: Engine) -> None:
    """No connection holds a lock (SQLite's write lock, a PostgreSQL row lock): a write of
    every session row that may not wait goes through."""
    with begin_waiting(engine, 0.2) as conn:
        conn.execute(text("UPDATE sessions SET n_events = n_events"))


POINTS = {"sqlite": 200, "postgresql": 50}
"""Interrupt points per sweep (PostgreSQL's round trips make its points dearer)."""


def test_a_ctrl_c_at_any_line_of_a_recording_leaves_it_failed_with_whole_rounds(
        db_url: str, make_rounds: MakeRounds, short_busy: None) -> None:
    """Sweep the interrupt over every few lines of creating a session, recording 4 rounds
    (2 flushes) and closing it: SQLAlchemy's and the recorder's own. Before the write
    sections held SIGINT, some points left the session `running` (a closing write that
    collided with the rows the interrupted flush had already committed, or that waited
    for the lock a connection abandoned mid-transaction still held)."""
    engine = open_db(db_url, True)
    rounds = make_rounds(4)
    _record_interrupted(engine, rounds, at=10**9)  # SQLAlchemy compiles its statements
    total, sid = _record_interrupted(engine, rounds, at=10**9)
    assert get_session(engine, sid).status is SessionStatus.FINISHED
    assert total > 200  # the sweep below reaches into the database code
    seen = sid
    for at in range(0, total, max(1, total // POINTS[engine.dialect.name])):
        _record_interrupted(engine, rounds, at)
        _assert_unlocked(engine)
        # Every new session, one this point created without returning its id included.
        with engine.connect() as conn:
            new = list(conn.scalars(select(sessions.c.id).where(sessions.c.id > seen)))
        for info in map(partial(get_session, engine), new):
            stored = count_events(engine, info.id)
            # Landing in the closing write of a run that had ended, it ends `finished`.
            finished = info.status is SessionStatus.FINISHED and stored == len(rounds)
            assert info.status is SessionStatus.FAILED or finished, (at, info.id, info.status)
            assert info.events == stored and stored % UNIT == 0, (at, info.events, stored)
        seen = max([seen, *new])
