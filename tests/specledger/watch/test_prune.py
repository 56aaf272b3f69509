"""`--keep N` and `--keep-for DURATION` bound what a watch keeps: the older sessions of its
log go, by count and by age, in one transaction with their events and request notes, and a
session still being written (`running`) is never touched, on SQLite and PostgreSQL."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from engine.errors import ConfigError
from eventlog import list_sessions, open_db
from eventlog.schema import events, sessions
from specledger.api import new_session
from specledger.watch.prune import parse_duration, prune
from specledger.watch.store import BACKEND, requests
from tests.specledger.watch.helpers import rows, watched

LONG_AGO = datetime.now(UTC) - timedelta(days=2)


@pytest.mark.parametrize("text,seconds", [("90s", 90), ("30m", 1800), ("12h", 43200),
                                          ("7d", 604800), ("1.5h", 5400), (" 2m ", 120)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["soon", "0s", "5", "5w", "-3m", "1h30m"])
def test_a_bad_duration_says_how_to_write_one(text: str) -> None:
    with pytest.raises(ConfigError, match="give a positive number and a unit"):
        parse_duration(text)


def age(db: str, session_ids: list[int]) -> None:
    """Date these sessions' request notes two days back."""
    with open_db(db, create=True).begin() as conn:
        conn.execute(update(requests).where(requests.c.session_id.in_(session_ids))
                     .values(recorded=LONG_AGO))


def _events(db: str, session_id: int) -> int:
    with open_db(db, create=False).connect() as conn:
        return conn.execute(select(func.count()).select_from(events)
                            .where(events.c.session_id == session_id)).scalar_one()


def test_keep_for_prunes_by_age(db_url: str, tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    watched(log, db_url, "two-slots")
    ids = [sid for sid, *_ in rows(db_url)]
    assert len(ids) == 4 and all(_events(db_url, sid) for sid in ids)
    age(db_url, ids[:2])
    engine = open_db(db_url, create=True)
    assert prune(engine, str(log), None, timedelta(days=3)) == 0  # none that old
    assert prune(engine, str(log), None, timedelta(days=1)) == 2
    assert [sid for sid, *_ in rows(db_url)] == ids[2:]
    assert [s.id for s in list_sessions(engine)] == ids[2:]
    assert [_events(db_url, sid) for sid in ids[:2]] == [0, 0]
    assert all(_events(db_url, sid) for sid in ids[2:])


def _running_session(db: str, log: Path) -> int:
    """A session of `log` being written (created, its request noted, no events yet),
    noted long ago."""
    engine = open_db(db, create=True)
    watched(log, db)  # the watch's tables
    sid = new_session(engine, {"watch": {"log": str(log)}}, BACKEND)
    with engine.begin() as conn:
        conn.execute(requests.insert().values(key="r" * 32, log=str(log), session_id=sid,
                                              slot=0, task=0, start=0, recorded=LONG_AGO))
    return sid


@pytest.mark.parametrize("keep,keep_for", [(1, None), (None, timedelta(hours=1)),
                                           (1, timedelta(hours=1))])
def test_pruning_never_touches_a_running_session(
        db_url: str, tmp_path: Path, keep: int | None, keep_for: timedelta | None) -> None:
    log = tmp_path / "s.log"
    running = _running_session(db_url, log)
    watched(log, db_url, "two-slots")
    ids = [sid for sid, *_ in rows(db_url)]
    assert ids[0] == running and len(ids) == 5  # the oldest, and the oldest noted
    age(db_url, ids[1:4])
    engine = open_db(db_url, create=True)
    assert prune(engine, str(log), keep, keep_for) == 3
    assert [sid for sid, *_ in rows(db_url)] == [running, ids[4]]
    with engine.connect() as conn:
        status = conn.execute(select(sessions.c.status).where(sessions.c.id == running))
        assert status.scalar_one() == "running"
