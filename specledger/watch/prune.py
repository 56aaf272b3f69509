"""Bound what `watch` keeps: the newest `keep` sessions of a log, or those recorded within
`keep_for`. One transaction deletes the older sessions' events, sessions and request
notes, and it never touches a session still `running` (one being written)."""

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Column, Connection, Engine, Table, delete, select

from engine.errors import ConfigError
from eventlog.interrupts import interrupts_deferred
from eventlog.schema import SessionStatus, metadata, sessions
from specledger.watch.store import requests

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")


def parse_duration(text: str) -> timedelta:
    """`90s`, `30m`, `12h`, `7d` as a timedelta."""
    m = _DURATION.match(text.strip())
    if m is None or float(m.group(1)) <= 0:
        raise ConfigError(f"--keep-for {text!r}: give a positive number and a unit, "
                          "s, m, h or d (30m, 12h, 7d)")
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])


def _session_columns() -> list[tuple[Table, Column[Any]]]:
    """Every ledger table's column that refers to a session (the events, and whatever
    table the schema adds beside them), dependents first."""
    return [(t, fk.parent) for t in reversed(metadata.sorted_tables) if t is not sessions
            for fk in t.foreign_keys if fk.column is sessions.c.id]


def prune(engine: Engine, log: str, keep: int | None, keep_for: timedelta | None) -> int:
    """Delete the sessions of `log` beyond the newest `keep`, and those recorded before
    `keep_for` ago; returns how many went."""
    if keep is None and keep_for is None:
        return 0
    with interrupts_deferred(), engine.begin() as conn:
        rows = conn.execute(
            select(requests.c.session_id, requests.c.recorded)
            .join(sessions, sessions.c.id == requests.c.session_id)
            .where(requests.c.log == log, sessions.c.status != SessionStatus.RUNNING.value)
            .order_by(requests.c.session_id.desc())).all()
        cutoff = datetime.now(UTC) - keep_for if keep_for is not None else None
        doomed = [sid for i, (sid, when) in enumerate(rows)
                  if (keep is not None and i >= keep)
                  or (cutoff is not None and when.astimezone(UTC) < cutoff)]
        if doomed:
            _delete(conn, doomed)
    return len(doomed)


def forget_sessions(engine: Engine, doomed: list[int]) -> None:
    """Delete these sessions, their events and notes, in one transaction (a run a watch
    stopped inside, read again whole by the next)."""
    with interrupts_deferred(), engine.begin() as conn:
        _delete(conn, doomed)


def _delete(conn: Connection, doomed: list[int]) -> None:
    for table, column in _session_columns():
        conn.execute(delete(table).where(column.in_(doomed)))
    conn.execute(delete(requests).where(requests.c.session_id.in_(doomed)))
    conn.execute(delete(sessions).where(sessions.c.id.in_(doomed)))
