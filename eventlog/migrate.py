"""`specledger migrate`: a ledger of an older schema version brought to this one, in place.

Version 1 stored each field of an event in a column of its own; version 2 keeps the
columns queries filter on and the whole event as one JSON `body` (eventlog/schema.py,
docs/events.md#versions). The migration copies every event into a new table in the new
layout, then swaps the tables and stamps the version, all in one transaction: a migration
that is interrupted (a crash, Ctrl-C, a full disk) leaves the ledger as it was, and
running it again starts over. Writers wait for it (it holds the write lock); SQLite
readers still read the old version until it commits.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Connection,
    Double,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    cast,
    func,
    select,
    text,
)

from eventlog.db import open_to_migrate
from eventlog.errors import NotASpecledgerDatabaseError
from eventlog.inserts import Row, encode_body, row_inserter
from eventlog.jsoncodec import decode_json
from eventlog.schema import SCHEMA_VERSION, events, meta, sessions

Progress = Callable[[int, int], None]
"""Called as (events copied, events in all) after each batch."""

_V1 = MetaData()
V1_EVENTS = Table(
    "events", _V1,
    Column("id", Integer, primary_key=True),
    Column("session_id", Integer, nullable=False),
    Column("seq", Integer, nullable=False),
    Column("slot", Integer, nullable=False),
    Column("turn", Integer, nullable=False),
    Column("round", Integer, nullable=False),
    Column("trigger", String(32), nullable=False),
    Column("source", String(16), nullable=False),
    Column("dest", String(16), nullable=False),
    Column("t", Double, nullable=False),
    Column("duration", Double, nullable=False),
    Column("payload", JSON, nullable=False),
    UniqueConstraint("session_id", "seq", name="uq_events_session_seq"),
)
"""The events table of schema version 1, as the migration reads it."""

_NEXT = "events_next"  # the new table while it fills; renamed to `events` at the end


@dataclass(frozen=True)
class Migrated:
    """What a migration did: the ledger's version before and after, and events copied."""

    ledger: str
    from_version: int
    to_version: int
    events: int


def migrate(db: str, progress: Progress | None = None, batch: int = 20_000) -> Migrated:
    """Bring the ledger `db` (a path or URL) to this schema version; a ledger already
    there is left alone."""
    engine, shown, version = open_to_migrate(db)
    try:
        if version == SCHEMA_VERSION:
            return Migrated(shown, version, version, 0)
        if version != 1:
            raise NotASpecledgerDatabaseError(
                f"{shown} has specledger schema version {version}: this specledger reads "
                f"version {SCHEMA_VERSION} and migrates version 1 only; open it with the "
                "specledger that wrote it")
        with engine.begin() as conn:
            _lock(conn)
            if conn.scalar(select(meta.c.value).where(meta.c.key == "schema_version")) != "1":
                raise NotASpecledgerDatabaseError(
                    f"{shown} changed version while this migration waited for it; run "
                    "`specledger migrate` again")
            n = _copy_events(conn, progress, batch)
            conn.execute(text("DROP TABLE events"))
            conn.execute(text(f"ALTER TABLE {_NEXT} RENAME TO events"))
            if conn.dialect.name == "postgresql":  # the names a new ledger's table has
                for old, new in ((f"{_NEXT}_pkey", "events_pkey"),
                                 (f"{_NEXT}_session_id_fkey", "events_session_id_fkey")):
                    conn.execute(text(f"ALTER TABLE events RENAME CONSTRAINT {old} TO {new}"))
            conn.execute(meta.update().where(meta.c.key == "schema_version")
                         .values(value=str(SCHEMA_VERSION)))
        return Migrated(shown, 1, SCHEMA_VERSION, n)
    finally:
        engine.dispose()


def _lock(conn: Connection) -> None:
    """Hold the ledger's write lock for the whole migration."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    elif conn.dialect.name == "postgresql":
        conn.execute(text("LOCK TABLE events IN ACCESS EXCLUSIVE MODE"))


def _copy_events(conn: Connection, progress: Progress | None, batch: int) -> int:
    """Every version-1 event written into the new table; how many."""
    layout = MetaData()
    sessions.to_metadata(layout)  # the new table's foreign key resolves against it
    target = events.to_metadata(layout, name=_NEXT)
    target.create(conn)
    insert = row_inserter(conn.engine, target)
    total = int(conn.scalar(select(func.count()).select_from(V1_EVENTS)) or 0)
    c = V1_EVENTS.c
    query = select(c.session_id, c.seq, c.slot, c.turn, c.round, c.trigger, c.source, c.dest,
                   c.t, c.duration, cast(c.payload, Text)).order_by(c.session_id, c.seq)
    compiled = query.compile(dialect=conn.dialect)
    driver = conn.connection.driver_connection
    assert driver is not None
    # PostgreSQL: a server-side cursor, so a big ledger is read `batch` rows at a time.
    server_side = conn.dialect.name == "postgresql"
    cursor = driver.cursor(name="specledger_migrate") if server_side else driver.cursor()
    done = 0
    try:
        cursor.execute(compiled.string)
        while rows := cursor.fetchmany(batch):
            insert(conn, [_row(r) for r in rows])
            done += len(rows)
            if progress is not None:
                progress(done, total)
    finally:
        cursor.close()
    return done


def _row(r: tuple[Any, ...]) -> Row:
    """A version-1 row as a version-2 row. The payload is parsed and written again, so a
    ledger's pre-standard `NaN` tokens become the standard form (eventlog/jsoncodec.py)."""
    sid, seq, slot, turn, rnd, trigger, source, dest, t, duration, payload = r
    return (sid, seq, slot, turn, rnd, trigger, dest,
            encode_body(seq, slot, turn, rnd, trigger, duration, source, t,
                        decode_json(payload), dest))
