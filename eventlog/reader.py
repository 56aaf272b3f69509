"""Reading sessions and events back. Readers never write."""

import gc
import re
from collections.abc import Collection, Generator, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import (
    Connection,
    Engine,
    Select,
    Text,
    bindparam,
    cast,
    func,
    literal_column,
    or_,
    select,
)
from sqlalchemy import Row as SqlRow
from sqlalchemy.pool import SingletonThreadPool

from eventlog.db import snapshot
from eventlog.errors import UnknownSessionError
from eventlog.liveness import locked_sessions, writer_gone
from eventlog.readahead import read_ahead
from eventlog.schema import BODY, SessionStatus, events, sessions
from fsm.event import Event
from fsm.states import RoundState, Trigger

_TRIGGERS = {t.value: t for t in Trigger}
_STATES = {s.value: s for s in RoundState}
_FIELD = re.compile(r"[a-z_]+")


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One session as stored, with `status` as the reader sees it (`incomplete` when the
    row says `running` but its writer is gone) and `events` the number of stored events."""

    id: int
    created: datetime
    status: SessionStatus
    events: int
    backend: str
    config: dict[str, Any]
    seeds: dict[str, Any]
    code_version: str
    model_digest: str | None
    parent_id: int | None
    writer_pid: int
    writer_host: str
    heartbeat: datetime


_AS_STORED = tuple(f.name for f in fields(SessionInfo) if f.name not in ("status", "events"))
"""The fields of a `SessionInfo` that are its session row's columns of the same name."""


def list_sessions(engine: Engine) -> list[SessionInfo]:
    """Every session, oldest first."""
    with snapshot(engine) as conn:
        rows = conn.execute(select(sessions).order_by(sessions.c.id)).all()
        locked = locked_sessions(conn)
    return [_info(row, locked) for row in rows]


def get_session(engine: Engine, session_id: int) -> SessionInfo:
    """The session `session_id`; `UnknownSessionError` names the ids that do exist (as
    they were when the row was looked for: one snapshot, while writers add sessions)."""
    with snapshot(engine) as conn:
        row = conn.execute(select(sessions).where(sessions.c.id == session_id)).first()
        if row is not None:
            return _info(row, _locked_if_running(conn, row))
        low, high = conn.execute(select(func.min(sessions.c.id), func.max(sessions.c.id))).one()
    known = "the database has no sessions" if low is None else f"known ids are {low}..{high}"
    raise UnknownSessionError(f"no session {session_id}: {known} (see `specledger sessions`)")


def count_events(engine: Engine, session_id: int) -> int:
    """The number of events stored for the session (counted, not the cached `n_events`)."""
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).where(
            events.c.session_id == session_id)) or 0)


def scan_events(
    engine: Engine, session_id: int, *, upto_seq: int | None = None,
    triggers: Collection[Trigger] | None = None, batch: int = 2000,
    after_seq: int | None = None,
) -> Iterator[Event]:
    """The session's events in seq order (after `after_seq`, through `upto_seq` inclusive;
    only those with one of `triggers`, when given), in memory that does not grow with the
    session; an unknown session fails here, not at the first `next()`.

    One streamed query (a server-side cursor) on PostgreSQL, spans of seqs read ahead on
    SQLite. Either reads what was committed when it began (one snapshot; on SQLite, the
    seqs through the last one stored then), so a live session yields whole rounds.
    """
    batches = scan_rows(engine, session_id, upto_seq=upto_seq, triggers=triggers, batch=batch,
                        after_seq=after_seq)
    return (_event(row) for rows in batches for row in rows)


def _event(row: "Row") -> Event:
    seq, slot, turn, rnd, trigger, duration, source, t, payload, dest = row
    return Event(seq, slot, turn, rnd, _TRIGGERS[trigger], _STATES[source], _STATES[dest],
                 t, duration, payload)


Row = list[Any]
"""One event as `scan_rows` reads it: its `body`, the fields in `eventlog.schema.BODY`
order (seq, slot, turn, round, trigger, duration, source, t, payload, dest), the trigger
and states as their names."""
SEQ, SLOT, TURN, ROUND, TRIGGER, DURATION, SOURCE, TIME, PAYLOAD, DEST = range(len(BODY))
"""The positions of the fields in a `Row`."""

# As text: psycopg would decode json itself, and more slowly.
_BODY_TEXT = cast(events.c.body, Text).label("body")


PARSE_CHUNK = 128
"""Rows per parsed list of `scan_rows`: a fold touches each list's rows right after the
parse, while they are still in the CPU's cache, and the next list reuses the memory this
one freed. Measured on the 1M-event postmortem: lists of 2000 rows cost 1.5 s more CPU
than lists of 64-200, about a third of the whole."""


def scan_rows(
    engine: Engine, session_id: int, *, triggers: Collection[Trigger] | None = None,
    required: Mapping[Trigger, str] | None = None, upto_seq: int | None = None,
    batch: int = 2000, chunk: int = PARSE_CHUNK, after_seq: int | None = None,
) -> Iterator[list[Row]]:
    """The session's events (only those with one of `triggers`, when given; after
    `after_seq`, through `upto_seq`), in lists of `chunk` (at most), each a `Row`, read from
    the database `batch` at a time (a PostgreSQL round trip; SQLite reads `SQLITE_SPAN`
    seqs per query, in a thread ahead of the caller), for the
    folds that read a whole session (eventlog/fold.py, the postmortem): no `Event` built.
    An event of a trigger in `required` is read only where its payload has that field (not
    JSON null), which the database decides."""
    get_session(engine, session_id)
    c = events.c
    sqlite = engine.dialect.name == "sqlite"
    # SQLite's spans bound the seqs themselves: given a second upper bound, it may range
    # its key over the other (every span reading on to the end).
    query = _where(select(_BODY_TEXT), session_id, None if sqlite else upto_seq, triggers,
                   None if sqlite else after_seq)
    for trigger, key in (required or {}).items():
        if not _FIELD.fullmatch(key):
            raise ValueError(f"not a payload field name: {key!r}")
        # The payload's field, on SQLite (3.38+) after a text search that spares the JSON
        # parse where the name does not occur at all.
        has = (literal_column(f"instr(events.body, '\"{key}\"') > 0 AND "
                              f"events.body ->> '$[{PAYLOAD}].{key}' IS NOT NULL") if sqlite
               else literal_column(f"events.body -> {PAYLOAD} ->> '{key}' IS NOT NULL"))
        query = query.where(or_(c.trigger != trigger.value, has))
    if sqlite:
        return _scan_sqlite(engine, query, session_id, (after_seq, upto_seq), chunk)
    return _scan_server(engine, query, batch, chunk)


def _parsed(texts: list[Any]) -> list[Row]:
    """The bodies `texts` (all str or all bytes) parsed, in one call for all: one JSON
    array of them. A version-2 body is always standard JSON (docs/events.md#versions: the
    migration rewrote the NaN tokens of older ledgers)."""
    if not texts:
        return []
    if isinstance(texts[0], bytes):
        return orjson.loads(b"[" + b",".join(texts) + b"]")
    return orjson.loads("[" + ",".join(texts) + "]")


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused for a whole-session fold. A scan makes a list
    and a payload per event and keeps none (reference counting frees them), so the
    collector's passes, triggered every few hundred allocations, found nothing and cost
    a tenth of a postmortem. Nested pauses resume only at the outermost's end."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _one_of(triggers: Collection[Trigger]) -> Any:
    """Whether an event's trigger is one of `triggers`, as the shorter of the IN and NOT IN
    lists: the database tests it once per event, a long list costing more."""
    inside = sorted(t.value for t in triggers)
    outside = sorted(t.value for t in Trigger if t not in triggers)
    return (events.c.trigger.not_in(outside) if len(outside) < len(inside)
            else events.c.trigger.in_(inside))


def slot_triggers(engine: Engine, session_id: int, slot: int, first_seq: int, last_seq: int
                  ) -> list[str]:
    """The triggers (their names) of one slot's events from `first_seq` through `last_seq`,
    in log order."""
    c = events.c
    query = select(c.trigger).where(c.session_id == session_id, c.slot == slot,
                                    c.seq.between(first_seq, last_seq)).order_by(c.seq)
    with engine.connect() as conn:
        return list(conn.scalars(query))


def last_seq(engine: Engine, session_id: int) -> int:
    """The seq of the session's latest stored event (0: none yet)."""
    with engine.connect() as conn:
        return int(conn.scalar(select(func.max(events.c.seq)).where(
            events.c.session_id == session_id)) or 0)


def last_events(engine: Engine, session_id: int, slots: Iterable[int], upto_seq: int
                ) -> dict[int, tuple[int, int, int, RoundState]]:
    """Each slot's latest event through `upto_seq` as (seq, turn, round, destination)."""
    c = events.c
    out = {}
    with engine.connect() as conn:
        for slot in slots:
            query = select(c.seq, c.turn, c.round, c.dest).where(
                c.session_id == session_id, c.slot == slot, c.seq <= upto_seq)
            row = conn.execute(query.order_by(c.seq.desc()).limit(1)).first()
            if row is not None:
                out[slot] = (row.seq, row.turn, row.round, _STATES[row.dest])
    return out


def _where(query: Select[Any], session_id: int, upto_seq: int | None,
           triggers: Collection[Trigger] | None, after_seq: int | None = None) -> Select[Any]:
    c = events.c
    query = query.where(c.session_id == session_id)
    if upto_seq is not None:
        query = query.where(c.seq <= upto_seq)
    if after_seq is not None:
        query = query.where(c.seq > after_seq)
    if triggers is not None:
        query = query.where(_one_of(triggers))
    return query.order_by(c.seq)


SQLITE_SPAN = 2048
"""Seqs per query of a SQLite scan. SQLite joins a span's bodies into one text, so the
reading thread (`eventlog.readahead`) takes the interpreter's lock once per span, not once
per event: the 1M-event postmortem took 2.3 s of wall with spans of 128 seqs, 1.4 s with
2048, and as long with 8192 or 16384."""

READ_AHEAD = 8
"""Spans a SQLite scan's reading thread may be ahead of the fold (a few MB at most)."""


SeqRange = tuple[int | None, int | None]
"""(after this seq, through this seq); None: the session's end on that side."""


def _scan_sqlite(engine: Engine, query: Select[Any], session_id: int, seqs: SeqRange,
                 chunk: int) -> Iterator[list[Row]]:
    """The bodies the query selects, a span of seqs (within `seqs`) per query, each span's
    joined by SQLite with newlines (a JSON body never holds a raw one) and read in a thread
    ahead of the caller; parsed in lists of `chunk`."""
    after_seq, upto_seq = seqs
    c = events.c
    spanned = query.where(c.seq >= bindparam("span_lo", 0), c.seq < bindparam("span_hi", 0))
    inner = spanned.subquery()
    # An aggregate over an ordered subquery reads it in that order (SQLite never flattens
    # the two into one query).
    joined = select(func.group_concat(inner.c.body, literal_column("char(10)")))
    compiled = joined.compile(dialect=engine.dialect,
                              compile_kwargs={"render_postcompile": True})
    names, fixed = compiled.positiontup or (), compiled.params
    # Two subqueries: SQLite finds a lone min or max at one end of the key, both in one
    # select by reading every row of the session.
    ends = (select(f(c.seq)).where(c.session_id == session_id).scalar_subquery()
            for f in (func.min, func.max))
    bounds = select(*ends)
    with engine.connect() as conn:
        first, last = conn.execute(bounds).one()
        if first is None:
            return
        first = first if after_seq is None else max(first, after_seq + 1)
        last = last if upto_seq is None else min(last, upto_seq)
        driver = conn.connection.driver_connection
        assert driver is not None
        # The text as bytes, which the driver copies where a str costs it a UTF-8 decode
        # (and orjson parses either).
        text_factory, driver.text_factory = driver.text_factory, bytes

        def spans() -> Generator[bytes, None, None]:
            for lo in range(first, last + 1, SQLITE_SPAN):
                values = {**fixed, "span_lo": lo, "span_hi": min(lo + SQLITE_SPAN, last + 1)}
                (text,) = driver.execute(compiled.string,
                                         tuple(values[k] for k in names)).fetchone()
                if text:
                    yield text

        # A private in-memory database lives in its creator's thread alone.
        texts = (spans() if isinstance(engine.pool, SingletonThreadPool)
                 else read_ahead(spans(), READ_AHEAD))
        try:
            for text in texts:
                bodies = text.split(b"\n")
                for start in range(0, len(bodies), chunk):
                    yield _parsed(bodies[start:start + chunk])
        finally:
            texts.close()  # the reading thread done with the connection before it goes back
            driver.text_factory = text_factory


def _scan_server(engine: Engine, query: Select[Any], batch: int, chunk: int
                 ) -> Iterator[list[Row]]:
    """The bodies the query selects, fetched `batch` at a time from a named (server-side)
    cursor of the driver's own (SQLAlchemy's row objects cost a third of a scan), parsed in
    lists of `chunk`."""
    compiled = query.compile(dialect=engine.dialect, compile_kwargs={"render_postcompile": True})
    params: Any = compiled.params
    if compiled.positional:
        params = tuple(params[key] for key in compiled.positiontup or ())
    with engine.connect() as conn:
        driver = conn.connection.driver_connection
        assert driver is not None
        cursor = driver.cursor(name="specledger_scan")
        try:
            cursor.execute(compiled.string, params)
            while rows := cursor.fetchmany(batch):
                bodies = [body for (body,) in rows]
                for start in range(0, len(bodies), chunk):
                    yield _parsed(bodies[start:start + chunk])
        finally:
            cursor.close()


def _locked_if_running(conn: Connection, row: SqlRow[Any]) -> frozenset[int] | None:
    """The writer locks, asked for only when the session's status depends on them."""
    if row.status != SessionStatus.RUNNING.value:
        return frozenset()
    return locked_sessions(conn)


def _info(row: SqlRow[Any], locked: frozenset[int] | None) -> SessionInfo:
    """`locked`: the sessions whose writer lock is held; None where there are no locks."""
    status = SessionStatus(row.status)
    if status is SessionStatus.RUNNING and writer_gone(
        row.writer_host, row.writer_pid, row.heartbeat,
        None if locked is None else row.id in locked,
    ):
        status = SessionStatus.INCOMPLETE
    return SessionInfo(status=status, events=row.n_events,
                       **{name: getattr(row, name) for name in _AS_STORED})
