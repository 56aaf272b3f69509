"""Recorder semantics: round trip, whole units only, group commit, closing, stale writers."""

import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine
from sqlalchemy.event import listen, remove

from eventlog import (
    NullRecorder,
    Recorder,
    SessionStatus,
    StaleWriterError,
    UnknownSessionError,
    count_events,
    create_session,
    get_session,
    open_db,
    scan_events,
)
from eventlog.errors import RecordingFailedError
from fsm.event import Event
from fsm.states import RoundState, Trigger

MakeRounds = Callable[..., list[Event]]
NEVER = 1e9  # flush_ms that never triggers within a test


def _record(rec: Recorder, rounds: list[Event], unit: int) -> None:
    for i, event in enumerate(rounds):
        rec.append(event)
        if i % unit == unit - 1:
            rec.end_unit()


def test_round_trip_preserves_every_field_in_seq_order(
    engine: Engine, session_id: int, make_rounds: MakeRounds
) -> None:
    events = make_rounds(50)
    with Recorder(engine, session_id, flush_events=64) as rec:
        _record(rec, events, 6)
    assert list(scan_events(engine, session_id, batch=7)) == events
    info = get_session(engine, session_id)
    assert info.status is SessionStatus.FINISHED
    assert info.events == count_events(engine, session_id) == len(events)
    assert info.config == {"strategy": "checkpoint", "draft_max": 4, "nested": {"k": [1, 2]}}
    assert info.seeds == {"run": 7}
    assert info.heartbeat >= info.created


def test_payloads_are_standard_json_with_non_finite_floats_named(
    engine: Engine, session_id: int
) -> None:
    payload = {"error": float("inf"), "low": float("-inf"), "x": [float("nan"), 0.5],
               "text": "nul \u0000, a\nnewline and ✓"}
    with Recorder(engine, session_id) as rec:
        rec.append(_note(0, payload))
        rec.end_unit()
    for read in (scan_events, scan_events):
        (event,) = read(engine, session_id)
        assert event.payload == {"error": "Infinity", "low": "-Infinity", "x": ["NaN", 0.5],
                                 "text": "nul \u0000, a\nnewline and ✓"}


def test_upto_seq_gives_the_prefix(
    engine: Engine, session_id: int, make_rounds: MakeRounds
) -> None:
    events = make_rounds(10)
    with Recorder(engine, session_id) as rec:
        _record(rec, events, 6)
    assert list(scan_events(engine, session_id, upto_seq=22, batch=5)) == events[:23]
    assert list(scan_events(engine, session_id, upto_seq=-1)) == []


def test_flush_writes_only_whole_units(
    engine: Engine, session_id: int, make_rounds: MakeRounds
) -> None:
    events = make_rounds(3)
    rec = Recorder(engine, session_id, flush_events=10_000, flush_ms=NEVER)
    _record(rec, events[:12], 6)
    for event in events[12:15]:  # half of the third round
        rec.append(event)
    assert count_events(engine, session_id) == 0  # below both thresholds
    rec.flush()
    assert count_events(engine, session_id) == 12
    rec.close(SessionStatus.FINISHED)  # the half round is not a round: dropped
    assert count_events(engine, session_id) == 12
    assert get_session(engine, session_id).events == 12


def test_group_commit_thresholds(engine: Engine, session_id: int, make_rounds: MakeRounds) -> None:
    events = make_rounds(4)
    by_count = Recorder(engine, session_id, flush_events=12, flush_ms=NEVER)
    _record(by_count, events[:6], 6)
    assert count_events(engine, session_id) == 0
    _record(by_count, events[6:12], 6)
    assert count_events(engine, session_id) == 12
    by_count.close(SessionStatus.FINISHED)

    other = create_session(engine, config={}, backend="sim", seeds={}, code_version="test")
    by_time = Recorder(engine, other, flush_events=10_000, flush_ms=0.0)
    _record(by_time, events[:6], 6)
    assert count_events(engine, other) == 6


@settings(max_examples=40, deadline=None)
@given(
    units=st.lists(st.integers(min_value=1, max_value=9), max_size=25),
    flush_events=st.integers(min_value=1, max_value=30),
    flush_every=st.integers(min_value=1, max_value=5),
)
def test_stored_events_always_end_at_a_unit_boundary(
    units: list[int], flush_events: int, flush_every: int
) -> None:
    engine = open_db("sqlite://", True)
    sid = create_session(engine, config={}, backend="sim", seeds={}, code_version="test")
    rec = Recorder(engine, sid, flush_events=flush_events, flush_ms=NEVER)
    boundaries, seq = {0}, 0
    for i, size in enumerate(units):
        for _ in range(size):
            rec.append(_note(seq))
            seq += 1
        if i % flush_every == 0:
            rec.flush()  # mid-way through nothing: the unit is not ended yet
            assert count_events(engine, sid) == max(boundaries)
        rec.end_unit()
        boundaries.add(seq)
        assert count_events(engine, sid) in boundaries
    rec.close(SessionStatus.FINISHED)
    assert [e.seq for e in scan_events(engine, sid)] == list(range(seq))


def test_exception_closes_failed_after_writing_whole_units(
    engine: Engine, session_id: int, make_rounds: MakeRounds
) -> None:
    events = make_rounds(2)
    with pytest.raises(KeyError), Recorder(engine, session_id, flush_ms=NEVER) as rec:
        _record(rec, events[:6], 6)
        rec.append(events[6])
        raise KeyError("engine bug")
    info = get_session(engine, session_id)
    assert info.status is SessionStatus.FAILED
    assert info.events == 6


def _disk_full_for(engine: Engine, *statements: str) -> Callable[[], None]:
    """From now on, SQLite answers the statements that begin so as a full disk does;
    until the function returned is called."""

    def refuse(conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.lstrip().upper().startswith(statements):
            raise sqlite3.OperationalError("database or disk is full")

    listen(engine, "before_cursor_execute", refuse)
    return lambda: remove(engine, "before_cursor_execute", refuse)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("refused", "status", "outcome"),
    [(("INSERT",), SessionStatus.FAILED, "marked failed, its 12 events (whole rounds) kept"),
     (("INSERT", "UPDATE"), SessionStatus.RUNNING,
      "it could not be marked failed (database or disk is full): it shows as incomplete")],
    ids=["status-still-fits", "nothing-fits"])
def test_a_full_disk_fails_the_session_where_the_status_still_fits(
    engine: Engine, session_id: int, make_rounds: MakeRounds, refused: tuple[str, ...],
    status: SessionStatus, outcome: str,
) -> None:
    """A flush that finds the disk full ends the run with one line saying what became of
    the session: `failed` with the rounds flushed before (the status alone is a small
    write), or, when not even that fits, left to read `incomplete`. It used to stay
    `running` either way, the close retrying the same rows."""
    events = make_rounds(4)
    with pytest.raises(RecordingFailedError) as err, Recorder(
            engine, session_id, flush_ms=NEVER) as rec:
        _record(rec, events[:12], 6)
        rec.flush()
        freed = _disk_full_for(engine, *refused)
        _record(rec, events[12:], 6)
        rec.flush()
    assert str(err.value) == (f"session {session_id} failed: database or disk is full; "
                              f"{outcome}")
    freed()
    info = get_session(engine, session_id)
    assert info.status is status and info.events == count_events(engine, session_id) == 12


def test_stale_writer_fails_loudly(
    engine: Engine, session_id: int, make_rounds: MakeRounds
) -> None:
    events = make_rounds(3)
    first = Recorder(engine, session_id)
    _record(first, events[:12], 6)
    first.flush()
    stale = Recorder(engine, session_id)
    _record(stale, events[6:12], 6)  # a second writer that thinks the log ends at seq 5
    with pytest.raises(StaleWriterError, match=r"seq 6\.\.11 .* ends at seq 11"):
        stale.flush()
    stale.close(SessionStatus.FAILED)  # a stale writer must not touch the session any more
    assert get_session(engine, session_id).status is SessionStatus.RUNNING
    _record(first, events[12:], 6)
    first.flush()
    assert get_session(engine, session_id).events == 18
    first.close(SessionStatus.FINISHED)
    assert [e.seq for e in scan_events(engine, session_id)] == list(range(18))


def test_recorder_refuses_unknown_session_and_bad_status(engine: Engine, session_id: int) -> None:
    with pytest.raises(UnknownSessionError):
        Recorder(engine, session_id + 1)
    with pytest.raises(ValueError, match="closes 'finished' or 'failed'"):
        Recorder(engine, session_id).close(SessionStatus.RUNNING)


def test_null_recorder_discards(engine: Engine, session_id: int, make_rounds: MakeRounds) -> None:
    with NullRecorder() as rec:
        for event in make_rounds(2):
            rec.append(event)
        rec.end_unit()
        rec.flush()
    assert count_events(engine, session_id) == 0


def _note(seq: int, payload: dict[str, Any] | None = None) -> Event:
    return Event(seq, 0, 0, seq, Trigger.LIVELOCK, RoundState.IDLE, RoundState.IDLE, 0.0, 0.0,
                 {"i": seq} if payload is None else payload)
