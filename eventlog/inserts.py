"""How a flush puts its rows into the events table, fastest per backend.

Rows go to the driver as plain tuples: SQLAlchemy's per-row parameter processing cost more
than SQLite's own insert. SQLite takes them through one `executemany` of the compiled
INSERT; PostgreSQL through COPY, which streams every row in one statement instead of a
bind-and-execute per row (and, unlike psycopg's pipelined executemany, ends cleanly when a
stale writer's row violates the seq constraint).
"""

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError

from eventlog.schema import events

COLUMNS = ("session_id", "seq", "slot", "turn", "round", "trigger", "source", "dest", "t",
           "duration", "payload")
"""The order of every row a flush writes."""

Row = tuple[Any, ...]
Inserter = Callable[[Connection, Sequence[Row]], None]


def _executemany(engine: Engine) -> Inserter:
    """The events INSERT in the dialect's own parameter style, run over all rows at once."""
    compiled = events.insert().compile(dialect=engine.dialect, column_keys=list(COLUMNS))
    sql = compiled.string
    if not compiled.positional:

        def named(conn: Connection, rows: Sequence[Row]) -> None:
            conn.exec_driver_sql(sql, [dict(zip(COLUMNS, r, strict=True)) for r in rows])

        return named
    order = tuple(compiled.positiontup or ())
    if order != COLUMNS:
        raise RuntimeError(f"unexpected parameter order {order} for the events insert")

    def positional(conn: Connection, rows: Sequence[Row]) -> None:
        conn.exec_driver_sql(sql, list(rows))

    return positional


def _copy(conn: Connection, rows: Sequence[Row]) -> None:
    """COPY the rows in, inside the connection's open transaction (psycopg 3)."""
    cursor = conn.connection.cursor()
    try:
        with cursor.copy(_COPY_SQL) as copy:
            write = copy.write_row
            for row in rows:
                write(row)
    finally:
        cursor.close()


_COPY_SQL = f"COPY events ({', '.join(COLUMNS)}) FROM STDIN"


def row_inserter(engine: Engine) -> Inserter:
    """The fastest way this engine's driver has to insert a flush's rows."""
    if engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg":
        return _copy
    return _executemany(engine)


def integrity_errors(engine: Engine) -> tuple[type[Exception], ...]:
    """What a constraint violation raises: SQLAlchemy's wrapper, or, from COPY (which runs
    on the driver's own cursor), the driver's own IntegrityError."""
    dbapi = engine.dialect.loaded_dbapi
    return (IntegrityError, dbapi.IntegrityError)
