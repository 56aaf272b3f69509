"""The event log: SQLAlchemy schema, batched recorder, reader and projection.

No torch here: viewers and the CLI read logs on machines without it.

Its names load on first use, so that a caller naming only the default ledger (the CLI's
parser) does not import SQLAlchemy.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eventlog.db import open_db
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

DEFAULT_DB = "specledger.db"
"""The CLI's default `--db`: a SQLite file in the working directory."""

_HOMES = {
    "open_db": "eventlog.db",
    "DatabaseUnavailableError": "eventlog.errors",
    "NotASpecledgerDatabaseError": "eventlog.errors",
    "StaleWriterError": "eventlog.errors",
    "UnknownSessionError": "eventlog.errors",
    "Projector": "eventlog.projection",
    "SlotView": "eventlog.projection",
    "project": "eventlog.projection",
    "SessionInfo": "eventlog.reader",
    "count_events": "eventlog.reader",
    "get_session": "eventlog.reader",
    "list_sessions": "eventlog.reader",
    "scan_events": "eventlog.reader",
    "NullRecorder": "eventlog.recorder",
    "Recorder": "eventlog.recorder",
    "create_session": "eventlog.recorder",
    "SCHEMA_VERSION": "eventlog.schema",
    "SessionStatus": "eventlog.schema",
}
"""Each name's module, imported when the name is first used."""

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


def __getattr__(name: str) -> Any:
    """A name of the package, from its module on first use."""
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
