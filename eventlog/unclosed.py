"""The sessions this process created and has not closed, and closing them `failed`.

A run that Ctrl-C ends between creating its session and entering its recorder (or
between a recorder's last write and its close) leaves no code of its own to close the
session; `fail_unclosed`, which the CLI calls on an interrupt, closes what is left.
"""

from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from eventlog.db import begin_waiting, first_line
from eventlog.errors import StaleWriterError
from eventlog.interrupts import interrupts_deferred
from eventlog.schema import SessionStatus, sessions

CLOSING_WAIT_S = 1.0
"""How long the closing write of an interrupted run waits for the ledger's write lock.
Another writer holds it for one flush (milliseconds); one that holds it longer must not
keep a Ctrl-C from ending the run (the session then shows `incomplete`, and says why)."""

Fail = Callable[[float | None], None]
"""How an open session's recorder closes it `failed`, waiting at most so long for locks."""

_open: dict[tuple[Engine, int], Fail | None] = {}


def track(engine: Engine, session_id: int, fail: Fail | None = None) -> None:
    """The session is this process's to close (`fail`: its recorder's way, once one has
    claimed it)."""
    _open[(engine, session_id)] = fail


def untrack(engine: Engine, session_id: int) -> None:
    """The session is closed."""
    _open.pop((engine, session_id), None)


def mark_failed(engine: Engine, session_id: int, wait_s: float | None) -> None:
    """The status alone set `failed` (of a session still `running`): the write a database
    that refused more (a full disk) is likeliest to still take."""
    with interrupts_deferred(), begin_waiting(engine, wait_s) as conn:
        conn.execute(sessions.update()
                     .where(sessions.c.id == session_id,
                            sessions.c.status == SessionStatus.RUNNING.value)
                     .values(status=SessionStatus.FAILED.value, heartbeat=datetime.now(UTC)))


def fail_unclosed(wait_s: float | None = CLOSING_WAIT_S) -> list[str]:
    """Close `failed` every session this process created and has not closed, each waiting
    at most `wait_s` for the write lock; one line per session that could not be closed."""
    problems = []
    for (engine, sid), fail in list(_open.items()):
        try:
            if fail is not None:
                fail(wait_s)
            else:
                mark_failed(engine, sid, wait_s)
        except (SQLAlchemyError, OSError, StaleWriterError) as err:
            problems.append(f"session {sid}: {not_marked_failed(err)}")
        untrack(engine, sid)
    return problems


def not_marked_failed(err: BaseException) -> str:
    """What became of a session whose closing write failed with `err`."""
    return f"it could not be marked failed ({first_line(err)}): it shows as incomplete"
