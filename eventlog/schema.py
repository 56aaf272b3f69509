"""The tables of the event log (SQLAlchemy Core), shared by SQLite and PostgreSQL."""

from datetime import UTC, datetime
from enum import StrEnum

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    TypeDecorator,
)

from fsm.payloads import EVENT_SCHEMA_VERSION

SCHEMA_VERSION = EVENT_SCHEMA_VERSION
"""The ledger's version: these tables and the event payloads (fsm/payloads.py,
docs/events.md) are one schema. Bump it there on any incompatible change; `open_db`
refuses a database with another version (`specledger migrate` upgrades an older one)."""


class SessionStatus(StrEnum):
    """Lifecycle of a session. `incomplete` is never stored: the reader derives it for a
    `running` session whose writer is gone."""

    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    INCOMPLETE = "incomplete"


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Normalise to UTC so naive storage still means UTC."""
        return None if value is None else value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Re-attach the UTC zone SQLite dropped; PostgreSQL's zone is converted to UTC."""
        if value is None:
            return None
        if value.tzinfo is not None:
            return value.astimezone(UTC)
        return value.replace(tzinfo=UTC)


metadata = MetaData()

meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", String(255), nullable=False),
)

sessions = Table(
    "sessions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created", UTCDateTime, nullable=False),
    Column("status", String(16), nullable=False),
    Column("config", JSON, nullable=False),
    Column("backend", String(32), nullable=False),
    Column("seeds", JSON, nullable=False),
    Column("code_version", String(64), nullable=False),
    Column("model_digest", String(128), nullable=True),
    Column("parent_id", Integer, ForeignKey("sessions.id"), nullable=True),
    Column("writer_pid", Integer, nullable=False),
    Column("writer_host", String(255), nullable=False),
    Column("heartbeat", UTCDateTime, nullable=False),
    Column("n_events", Integer, nullable=False, default=0),
)

BODY = ("seq", "slot", "turn", "round", "trigger", "duration", "source", "t", "payload",
        "dest")
"""The fields of an event, in the order its `body` holds them (docs/events.md#versions)."""


def _keyed_by_seq(seq: str) -> list[Column[int]]:
    """The leading columns of a table of a session's rows keyed by a seq of its events:
    (session_id, `seq`) the key, then the row's slot and turn."""
    return [Column("session_id", Integer, ForeignKey("sessions.id"), primary_key=True,
                   autoincrement=False),
            Column(seq, Integer, primary_key=True, autoincrement=False),
            Column("slot", Integer, nullable=False),
            Column("turn", Integer, nullable=False)]


events = Table(
    "events",
    metadata,
    # The columns a query filters on; every field of the event is in `body`.
    *_keyed_by_seq("seq"),
    Column("round", Integer, nullable=False),
    Column("trigger", String(32), nullable=False),
    Column("dest", String(16), nullable=False),
    # The whole event as one JSON array in `BODY` order, payload included: a scan reads
    # one value per event and parses it in one call, where a column per field cost the
    # driver a Python object each and the scan twice the time (docs/events.md#versions).
    Column("body", JSON, nullable=False),
    # SQLite: the rows themselves in (session_id, seq) order, so a session's scan walks one
    # B-tree in order instead of an index and a table lookup per event.
    sqlite_with_rowid=False,
)

turns = Table(
    "turns",
    metadata,
    # end_seq, the seq of the turn's END_TURN: the order turns ended, and unique where a
    # (slot, turn) pair may repeat in a malformed log.
    *_keyed_by_seq("end_seq"),
    # How many of the session's events are this turn's: when the turns of a session hold
    # all of its events, no turn is open and the summaries are the whole story.
    Column("events", Integer, nullable=False),
    # {"metrics": END_TURN's metrics, "drafts": [[drafted, accepted, rounds], ...]}
    Column("body", JSON, nullable=False),
    sqlite_with_rowid=False,
)
"""One row per turn that ended, written with the turn's last events (the recorder's fold
of them): what `show` reads instead of the rounds. Added to schema version 2 without a new
version: a reader of an older ledger, or of a session an older writer recorded, finds no
rows and folds the events as before; a writer adds the table to a ledger that lacks it."""
