"""Reader: session listing, unknown ids, and how a dead writer's session is reported."""

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, event, text, update

from eventlog import (
    Recorder,
    SessionStatus,
    UnknownSessionError,
    create_session,
    get_session,
    list_sessions,
    open_db,
    scan_events,
)
from eventlog.schema import sessions


def _set(engine: Engine, session_id: int, **values: object) -> None:
    with engine.begin() as conn:
        conn.execute(update(sessions).where(sessions.c.id == session_id).values(**values))


def test_sessions_are_listed_oldest_first_with_their_lineage(
    db_url: str, engine: Engine, session_id: int
) -> None:
    child = create_session(
        engine,
        config={"strategy": "per_token"},
        backend="torch",
        seeds={"run": 8},
        code_version="abc123",
        model_digest="sha256:feed",
        parent_id=session_id,
    )
    Recorder(engine, child).close(SessionStatus.FAILED)
    listed = list_sessions(open_db(db_url, False))
    assert [(s.id, s.status, s.parent_id) for s in listed] == [
        (session_id, SessionStatus.RUNNING, None),
        (child, SessionStatus.FAILED, session_id),
    ]
    assert listed[1].model_digest == "sha256:feed"
    assert listed[1].backend == "torch"
    assert listed[1].created.tzinfo is not None


def test_unknown_session_names_the_known_range(engine: Engine) -> None:
    with pytest.raises(UnknownSessionError, match="the database has no sessions"):
        get_session(engine, 1)
    for _ in range(2):
        create_session(engine, config={}, backend="sim", seeds={}, code_version="t")
    with pytest.raises(UnknownSessionError, match=r"no session 99: known ids are 1\.\.2"):
        scan_events(engine, 99)  # eager: fails before the first next()


def test_a_session_created_while_it_is_looked_up_is_there_or_not(
        db_url: str, engine: Engine) -> None:
    """`get_session` reads the row and, when there is none, the range of ids: a writer's
    session committed between the two statements once gave "no session 4: known ids are
    1..4". Both now read one snapshot, taken before the writer commits."""
    for _ in range(3):
        create_session(engine, config={}, backend="sim", seeds={}, code_version="t")
    reader = open_db(db_url, False)
    created = []

    def writer_commits_between(conn: object, cursor: object, statement: str,
                               *args: object) -> None:
        if "min(sessions.id)" in statement and not created:
            created.append(create_session(engine, config={}, backend="sim", seeds={},
                                          code_version="t"))

    event.listen(reader, "before_cursor_execute", writer_commits_between)
    with pytest.raises(UnknownSessionError, match=r"no session 4: known ids are 1\.\.3 "):
        get_session(reader, 4)
    assert created == [4]
    assert get_session(reader, 4).id == 4  # the next look sees it


def test_dead_writer_on_this_host_is_incomplete(engine: Engine, session_id: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    _set(engine, session_id, writer_pid=int(done.stdout))
    assert get_session(engine, session_id).status is SessionStatus.INCOMPLETE
    _set(engine, session_id, status=SessionStatus.FINISHED.value)
    assert get_session(engine, session_id).status is SessionStatus.FINISHED


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_without_writer_locks_another_host_is_judged_by_its_heartbeat(
    engine: Engine, session_id: int
) -> None:
    now = datetime.now(UTC)
    _set(engine, session_id, writer_host="elsewhere", heartbeat=now - timedelta(minutes=2))
    assert get_session(engine, session_id).status is SessionStatus.RUNNING
    _set(engine, session_id, heartbeat=now - timedelta(minutes=11))
    assert get_session(engine, session_id).status is SessionStatus.INCOMPLETE


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_on_postgresql_the_writer_lock_decides_for_any_host(
    engine: Engine, session_id: int
) -> None:
    rec = Recorder(engine, session_id)
    _set(engine, session_id, writer_host="elsewhere",
         heartbeat=datetime.now(UTC) - timedelta(hours=1))
    assert get_session(engine, session_id).status is SessionStatus.RUNNING
    assert [s.status for s in list_sessions(engine)] == [SessionStatus.RUNNING]
    with engine.begin() as conn:  # the writer's connection dies, as with a SIGKILL
        killed = conn.scalar(text(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks "
            "WHERE locktype = 'advisory' AND objid = :sid"), {"sid": session_id})
    assert killed == 1
    _set(engine, session_id, heartbeat=datetime.now(UTC))  # fresh, yet the lock is gone
    assert get_session(engine, session_id).status is SessionStatus.INCOMPLETE
    assert [s.status for s in list_sessions(engine)] == [SessionStatus.INCOMPLETE]
    rec.close()  # the lock went with its connection: closing still records the end
    assert get_session(engine, session_id).status is SessionStatus.FINISHED


def test_live_writer_is_running(engine: Engine, session_id: int) -> None:
    assert get_session(engine, session_id).status is SessionStatus.RUNNING
