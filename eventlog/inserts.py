"""How a flush puts its rows into the events table, fastest per backend.

Rows go to the driver as plain tuples: SQLAlchemy's per-row parameter processing cost more
than SQLite's own insert. SQLite takes them through one `executemany` of the compiled
INSERT; PostgreSQL through COPY, which streams every row in one statement instead of a
bind-and-execute per row (and, unlike psycopg's pipelined executemany, ends cleanly when a
stale writer's row violates the seq constraint).
"""

from collections.abc import Callable, Sequence
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, Table
from sqlalchemy.exc import IntegrityError

from eventlog.jsoncodec import encode_json
from eventlog.schema import events
from fsm.event import Event

COLUMNS = ("session_id", "seq", "slot", "turn", "round", "trigger", "dest", "body")
"""The order of every row a flush writes."""

Row = tuple[Any, ...]
Inserter = Callable[[Connection, Sequence[Row]], None]


def event_row(session_id: int, e: Event) -> Row:
    """The row of event `e` in `COLUMNS` order."""
    trigger, dest = e.trigger._value_, e.dest._value_
    return (session_id, e.seq, e.slot, e.turn, e.round, trigger, dest,
            encode_body(e.seq, e.slot, e.turn, e.round, trigger, e.duration, e.source._value_,
                        e.t, e.payload, dest))


def encode_body(seq: int, slot: int, turn: int, rnd: int, trigger: str, duration: float,
                source: str, t: float, payload: Any, dest: str) -> str:
    """An event's `body`: its fields as one JSON array, in `eventlog.schema.BODY` order.

    Every recorded event is encoded here, and its two floats cost the standard encoder
    more than the rest: orjson writes a body in a fraction of the time. It writes a
    non-finite float as null, though, where the log keeps its name (eventlog/jsoncodec.py),
    so a body with a null in it (an unknown field, mostly) is encoded the careful way."""
    body = [seq, slot, turn, rnd, trigger, duration, source, t, payload, dest]
    try:
        text = orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError:  # beyond orjson (an integer over 64 bits, say)
        return encode_json(body)
    return encode_json(body) if b"null" in text else text.decode()


def _executemany(engine: Engine, table: Table) -> Inserter:
    """The INSERT in the dialect's own parameter style, run over all rows at once."""
    compiled = table.insert().compile(dialect=engine.dialect, column_keys=list(COLUMNS))
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


def _copy(table: Table) -> Inserter:
    """COPY the rows in, inside the connection's open transaction (psycopg 3)."""
    sql = f"COPY {table.name} ({', '.join(COLUMNS)}) FROM STDIN"

    def copy_rows(conn: Connection, rows: Sequence[Row]) -> None:
        cursor = conn.connection.cursor()
        try:
            with cursor.copy(sql) as copy:
                write = copy.write_row
                for row in rows:
                    write(row)
        finally:
            cursor.close()

    return copy_rows


def row_inserter(engine: Engine, table: Table = events) -> Inserter:
    """The fastest way this engine's driver has to insert a flush's rows into `table` (the
    events table, or a migration's new one)."""
    if engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg":
        return _copy(table)
    return _executemany(engine, table)


def integrity_errors(engine: Engine) -> tuple[type[Exception], ...]:
    """What a constraint violation raises: SQLAlchemy's wrapper, or, from COPY (which runs
    on the driver's own cursor), the driver's own IntegrityError."""
    return (IntegrityError, engine.dialect.loaded_dbapi.IntegrityError)
