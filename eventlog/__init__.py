"""The event log: SQLAlchemy schema, batched recorder, reader and projection.

No torch here: viewers and the CLI read logs on machines without it.
"""

from eventlog.db import DEFAULT_DB, open_db
from eventlog.errors import (
    DatabaseUnavailableError,
    NotASpecledgerDatabaseError,
    StaleWriterError,
    UnknownSessionError,
)
from eventlog.projection import Projector, SlotView, project
from eventlog.reader import (
    SessionInfo,
    count_events,
    get_session,
    list_sessions,
    scan_events,
)
from eventlog.recorder import NullRecorder, Recorder, create_session
from eventlog.schema import SCHEMA_VERSION, SessionStatus

__all__ = [
    "DEFAULT_DB",
    "SCHEMA_VERSION",
    "DatabaseUnavailableError",
    "NotASpecledgerDatabaseError",
    "NullRecorder",
    "Projector",
    "Recorder",
    "SessionInfo",
    "SessionStatus",
    "SlotView",
    "StaleWriterError",
    "UnknownSessionError",
    "count_events",
    "create_session",
    "get_session",
    "list_sessions",
    "open_db",
    "project",
    "scan_events",
]
