"""The tables of the event log (SQLAlchemy Core), shared by SQLite and PostgreSQL."""

from datetime import UTC, datetime
from enum import StrEnum

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Dialect,
    Double,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    TypeDecorator,
    UniqueConstraint,
)

from fsm.payloads import EVENT_SCHEMA_VERSION

SCHEMA_VERSION = EVENT_SCHEMA_VERSION
"""The ledger's version: these tables and the event payloads (fsm/payloads.py,
docs/events.md) are one schema. Bump it there on any incompatible change; `open_db`
refuses a database with another version."""


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

events = Table(
    "events",
    metadata,
    # BIGINT is not a rowid alias on SQLite (no autoincrement there), so it is Integer there.
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("session_id", Integer, ForeignKey("sessions.id"), nullable=False),
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
    # The unique constraint is also the (session_id, seq) index every read uses; a second
    # index on the same columns would only double the write cost.
    UniqueConstraint("session_id", "seq", name="uq_events_session_seq"),
)
