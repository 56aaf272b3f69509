"""Whether the writer of a `running` session is still alive.

A writer that dies without closing leaves its session `running`; readers call it
`incomplete` once they can tell the writer is gone. On SQLite they ask the operating
system about the writer's pid when it ran on this host, and trust its heartbeat when it
ran elsewhere. On PostgreSQL every recorder also holds a shared advisory lock keyed by its
session, on a connection of its own: the server drops the lock as soon as that connection
dies (a SIGKILL included), so a reader on any host sees a dead writer at once.
"""

import os
import socket
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

STALE_HEARTBEAT = timedelta(minutes=10)
"""Without a writer lock, a `running` session on another host whose heartbeat is older
than this is `incomplete`."""

LOCK_SPACE = 0x5EDE
"""The first key of specledger's two-key advisory locks; the second is the session id."""

_LOCKED = text(
    "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
    "AND classid = :space "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


class WriterLock:
    """The advisory lock a recorder holds on PostgreSQL for as long as it writes a session.

    Shared, so a second (stale) writer of the same session takes it too, and never waits.
    """

    def __init__(self, engine: Engine, session_id: int) -> None:
        self._params = {"space": LOCK_SPACE, "sid": session_id}
        self._conn: Connection | None = engine.connect()
        self._conn.execute(text("SELECT pg_advisory_lock_shared(:space, :sid)"), self._params)
        # The lock belongs to the connection, not the transaction: commit so the connection
        # never sits idle inside a transaction for the whole run.
        self._conn.commit()

    def release(self) -> None:
        """Release the lock and the connection (again: nothing)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            # Pooled connections outlive this object: unlock before handing it back.
            conn.execute(text("SELECT pg_advisory_unlock_shared(:space, :sid)"), self._params)
            conn.commit()
        except DBAPIError:
            conn.invalidate()  # the connection died, and the lock with it
        finally:
            conn.close()


def hold_writer_lock(engine: Engine, session_id: int) -> WriterLock | None:
    """Take the writer lock of `session_id`; None on a backend without advisory locks."""
    if engine.dialect.name != "postgresql":
        return None
    return WriterLock(engine, session_id)


def locked_sessions(conn: Connection) -> frozenset[int] | None:
    """The sessions whose writer holds its lock now; None on a backend without locks."""
    if conn.dialect.name != "postgresql":
        return None
    return frozenset(int(sid) for sid in conn.scalars(_LOCKED, {"space": LOCK_SPACE}))


def writer_gone(host: str, pid: int, heartbeat: datetime, locked: bool | None) -> bool:
    """Whether the writer of a `running` session died without closing it. `locked`: whether
    its writer lock is held (None where the backend has no locks)."""
    if locked:
        return False
    if host == socket.gethostname():
        # Also covers the moment between creating a session and its recorder's lock.
        return not _alive(pid)
    if locked is None:
        return datetime.now(UTC) - heartbeat > STALE_HEARTBEAT
    return True  # a live writer elsewhere would hold its lock


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by another user
    return True
