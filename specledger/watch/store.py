"""What `watch` keeps in the ledger besides the sessions: where it stopped in each log
(`watch_cursors`: the file's identity and offset, so the next run resumes there) and the
requests it recorded (`watch_requests`: each request's key, so none is recorded twice,
and its session, so old ones can be pruned) and, with `--responses-from`, the answer
lines requests took (`watch_answers`, so a resumed watch does not hold them again). The
tables are watch's own; they are created beside the ledger's on first use and no other
command reads them."""

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    delete,
    select,
)

from eventlog.interrupts import interrupts_deferred
from eventlog.schema import UTCDateTime, sessions
from specledger.api import new_session
from specledger.observed import write_journal
from specledger.watch.follower import Cursor
from specledger.watch.requests import Request

BACKEND = "llama"
watch_metadata = MetaData()

cursors = Table(
    "watch_cursors", watch_metadata,
    Column("log", String(1024), primary_key=True),
    Column("dev", BigInteger, nullable=False),
    Column("ino", BigInteger, nullable=False),
    Column("offset", BigInteger, nullable=False),
    Column("line", BigInteger, nullable=False),
    Column("tail_sha", String(64), nullable=False),
    Column("updated", UTCDateTime, nullable=False),
)

requests = Table(
    "watch_requests", watch_metadata,
    Column("key", String(32), primary_key=True),
    Column("log", String(1024), nullable=False, index=True),
    Column("session_id", Integer, nullable=False, index=True),
    Column("slot", Integer, nullable=False),
    Column("task", Integer, nullable=False),
    Column("start", BigInteger, nullable=False),
    Column("recorded", UTCDateTime, nullable=False),
)

answers_taken = Table(  # one row per answer line taken: the key is the whole row
    "watch_answers", watch_metadata, Column("source", String(1024), primary_key=True),
    *(Column(name, BigInteger, primary_key=True) for name in ("dev", "ino", "line")),
)


def ensure_tables(engine: Engine) -> None:
    """Create watch's tables where the ledger lacks them."""
    watch_metadata.create_all(engine, checkfirst=True)


def load_cursor(engine: Engine, log: str) -> Cursor | None:
    """Where the last watch of `log` stopped, or None."""
    with engine.connect() as conn:
        row = conn.execute(select(cursors).where(cursors.c.log == log)).first()
    if row is None:
        return None
    return Cursor(row.dev, row.ino, row.offset, row.line, row.tail_sha)


def save_cursor(engine: Engine, log: str, cursor: Cursor) -> None:
    """Remember where reading `log` has got to."""
    with interrupts_deferred(), engine.begin() as conn:
        conn.execute(delete(cursors).where(cursors.c.log == log))
        conn.execute(cursors.insert().values(log=log, **asdict(cursor),
                                             updated=datetime.now(UTC)))


def recorded_keys(engine: Engine, log: str, since: int) -> set[str]:
    """The keys of the requests of `log` recorded from byte `since` on (what a resumed
    watch may read again)."""
    with engine.connect() as conn:
        return set(conn.execute(select(requests.c.key).where(
            requests.c.log == log, requests.c.start >= since)).scalars())


def store_request(engine: Engine, log: str, req: Request, extra: dict[str, Any]) -> int:
    """Record `req` as a session (its config with `extra` under `watch`) and note its key;
    returns the session's id. The key is noted before the events are written: a watch
    killed in between leaves the session incomplete, never a second copy."""
    config = {**req.config, "watch": extra}
    sid = new_session(engine, config, BACKEND)
    note_key(engine, log, req.key, sid, req.task.slot, req.task.task, req.start)
    write_journal(engine, sid, req.journal, failed=req.error is not None)
    return sid


def note_key(engine: Engine, log: str, key: str, sid: int, slot: int, task: int,
             start: int) -> None:
    """Note that what starts at byte `start` of `log` (`key`: a request, slot and task; a
    server run of an interval log, slot 0 and its number) is recorded in session `sid`."""
    with interrupts_deferred(), engine.begin() as conn:
        conn.execute(requests.insert().values(
            key=key, log=log, session_id=sid, slot=slot, task=task, start=start,
            recorded=datetime.now(UTC)))


def recorded_sessions(engine: Engine, log: str, since: int) -> dict[str, int]:
    """The session of each key of `log` recorded from byte `since` on."""
    with engine.connect() as conn:
        return {r.key: r.session_id for r in conn.execute(
            select(requests.c.key, requests.c.session_id).where(
                requests.c.log == log, requests.c.start >= since))}


def update_config(engine: Engine, sid: int, config: dict[str, Any]) -> None:
    """Store session `sid`'s configuration as it is now known (a run's, at its end)."""
    with interrupts_deferred(), engine.begin() as conn:
        conn.execute(sessions.update().where(sessions.c.id == sid).values(config=config))


def note_answer(engine: Engine, source: str, dev: int, ino: int, line: int) -> None:
    """Remember that the answer at `line` of the file `dev`/`ino` was taken."""
    with interrupts_deferred(), engine.begin() as conn:
        conn.execute(answers_taken.insert().values(source=source, dev=dev, ino=ino,
                                                   line=line))


def taken_answers(engine: Engine, source: str) -> set[tuple[int, int, int]]:
    """The (dev, ino, line) of every answer of `source` noted as taken."""
    with engine.connect() as conn:
        return {(r.dev, r.ino, r.line) for r in conn.execute(
            select(answers_taken).where(answers_taken.c.source == source))}


def forget_answers(engine: Engine, source: str, cursor: Cursor) -> None:
    """Drop the notes a watch resuming at `cursor` never reads again: those before it in
    its file, and those of other files."""
    c = answers_taken.c
    with interrupts_deferred(), engine.begin() as conn:
        conn.execute(delete(answers_taken).where(
            c.source == source, (c.dev != cursor.dev) | (c.ino != cursor.ino)
            | (c.line < cursor.line)))
