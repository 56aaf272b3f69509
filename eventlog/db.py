"""Opening a specledger database from a path or a SQLAlchemy URL, with errors a user can act on."""

import os
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, select, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError

from eventlog.errors import (
    DatabaseUnavailableError,
    DatabaseUrlError,
    EmptyLedgerError,
    NotASpecledgerDatabaseError,
)
from eventlog.interrupts import interrupts_deferred
from eventlog.jsoncodec import encode_json
from eventlog.liveness import LOCK_SPACE
from eventlog.schema import SCHEMA_VERSION, meta, metadata


def open_db(db: str, create: bool) -> Engine:
    """Open the database `db` (a filesystem path, or any SQLAlchemy URL: it contains '://').

    Writers pass `create=True`: a missing SQLite file (and its directory) is created with the
    schema; on a server (PostgreSQL) the database must exist, and an empty one gets the schema.
    Readers pass `create=False`: nothing is created and their connections are query-only;
    a database with no tables at all has no sessions yet (`EmptyLedgerError`): its first
    writer may be creating the schema this moment, which it does in one transaction, so a
    reader sees all of it or none. Either way the database must be a specledger database
    of this schema version.
    """
    url, shown = _parse(db)
    sqlite_file = _sqlite_file(url)
    if sqlite_file is not None and not sqlite_file.exists():
        if not create:
            raise DatabaseUnavailableError(
                f"no database at {shown}; record one with `specledger run --db {shown}` "
                "or pass another --db"
            )
        try:
            sqlite_file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DatabaseUnavailableError(
                f"cannot create {shown}: {exc.strerror} ({sqlite_file.parent})"
            ) from exc
    elif sqlite_file is not None and create:
        _look_before_writing(url, shown)
    engine = _engine(url, shown, writer=create)
    try:
        version = _stored_version(engine, shown)
        if version is None and create:
            version = _create_schema(engine, shown)
        if version is None:
            raise EmptyLedgerError(f"{shown} has no sessions yet (no tables: a ledger being "
                                   f"created, or never written); record one with "
                                   f"`specledger run --db {shown}`")
        if version != str(SCHEMA_VERSION):
            raise NotASpecledgerDatabaseError(_version_mismatch(shown, version))
        if create:
            _add_new_tables(engine, shown)
    except BaseException:
        engine.dispose()
        raise
    return engine


def _version_mismatch(shown: str, version: str) -> str:
    """One line: which side is older, and what to do (docs/events.md#versions)."""
    if version.isdigit() and int(version) < SCHEMA_VERSION:
        return (f"{shown} has specledger schema version {version}, written by an older "
                f"specledger; this one reads version {SCHEMA_VERSION} "
                f"(docs/events.md#versions): upgrade it with `specledger migrate --db "
                f"{shown}` (nothing is lost if it is interrupted), or pass another --db")
    return (f"{shown} has specledger schema version {version}, written by another "
            f"specledger; this one reads version {SCHEMA_VERSION} (docs/events.md#versions): "
            f"open it with the specledger that wrote it, or pass another --db")


def open_to_migrate(db: str) -> tuple[Engine, str, int | None]:
    """A writer's engine on the existing ledger `db`, how to show it and its stored schema
    version (None: not a number), whatever the version is (`eventlog.migrate`)."""
    url, shown = _parse(db)
    sqlite_file = _sqlite_file(url)
    if sqlite_file is not None:
        if not sqlite_file.exists():
            raise DatabaseUnavailableError(f"no database at {shown}; pass another --db")
        why = _read_only(sqlite_file)
        if why:
            raise DatabaseUnavailableError(f"{shown} is read-only here ({why}): run this with "
                                           "write access to it, or on a writable copy")
        # Refused before a writer opens it: its WAL pragma would give an empty file a header.
        if _look_before_writing(url, shown) is None:
            raise NotASpecledgerDatabaseError(f"{shown} is empty: not a specledger database")
    engine = _engine(url, shown, writer=True)
    try:
        version = _stored_version(engine, shown)
        if version is None:
            raise NotASpecledgerDatabaseError(f"{shown} is empty: not a specledger database")
    except BaseException:
        engine.dispose()
        raise
    return engine, shown, int(version) if version.isdigit() else None


def _look_before_writing(url: URL, shown: str) -> str | None:
    """Refuse an existing SQLite file that is not a specledger database, through a
    read-only engine: a writer's WAL pragma must never touch a file that is not ours. The
    stored schema version; None for a file with no tables."""
    reader = _engine(url, shown, writer=False)
    try:
        return _stored_version(reader, shown)
    finally:
        reader.dispose()


def _read_only(path: Path | None) -> str | None:
    """Why the SQLite ledger at `path` cannot be written here, or None. SQLite writes the
    file and creates its -wal and -shm files beside it (a WAL ledger needs the -shm even
    to be read), and answers either lack with a bare "unable to open database file"."""
    if path is None or not path.is_file():
        return None
    if not os.access(path, os.W_OK):
        return "the file cannot be written"
    side = [path.with_name(path.name + s) for s in ("-wal", "-shm")]
    if not all(p.exists() for p in side) and not os.access(path.parent, os.W_OK):
        return (f"its folder {path.parent} cannot be written, where SQLite creates its "
                "-wal and -shm files")
    return None


def _parse(db: str) -> tuple[URL, str]:
    """The URL `db` names, checked whole before anything is opened or created: its port
    and the options its driver reads from the query; and how messages show it (a URL
    without its password)."""
    if not db.strip():
        raise DatabaseUrlError("--db is empty: pass the path of a ledger file or a database "
                               "URL")
    if "://" not in db:
        return URL.create("sqlite+pysqlite", database=str(Path(db).expanduser())), db
    masked = re.sub(r"://[^/@]*@", "://***@", db)
    try:
        url = make_url(db)
    # SQLAlchemy raises ValueError, not ArgumentError, for a port that is not a number
    # (an unclosed IPv6 bracket reads as one).
    except (ArgumentError, ValueError) as exc:
        why = "" if isinstance(exc, ArgumentError) else f" ({exc})"
        raise DatabaseUrlError(
            f"cannot parse database URL '{masked}'{why}: expected a path or a URL like "
            "sqlite:///run.db or postgresql://user@host:5432/db"
        ) from exc
    shown = url.render_as_string(hide_password=True)
    try:
        dialect = url.get_dialect()
    except (NoSuchModuleError, ImportError):
        return url, shown  # `_engine` names the unknown dialect or the missing driver
    try:
        dialect().create_connect_args(url)
    except (ValueError, TypeError) as exc:  # e.g. sqlite:///f.db?timeout=abc
        raise DatabaseUrlError(f"bad option in database URL '{masked}': {exc}") from exc
    return url, shown


def _sqlite_file(url: URL) -> Path | None:
    """The file behind a SQLite URL; None for in-memory and non-SQLite databases."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    if url.query.get("uri") or str(url.database).startswith("file:"):
        return None
    return Path(str(url.database))


SQLITE_BUSY_S = 60.0


def _engine(url: URL, shown: str, writer: bool) -> Engine:
    # SQLite's busy wait: writers starting together on one file queue for its write lock,
    # and on a loaded machine the default 5 s ran out before the schema creator let go.
    connect_args = {"timeout": SQLITE_BUSY_S} if url.get_backend_name() == "sqlite" else {}
    try:
        engine = create_engine(url, json_serializer=encode_json, connect_args=connect_args)
    except NoSuchModuleError as exc:
        raise DatabaseUnavailableError(
            f"unknown database dialect '{url.drivername}' in {shown}; use a path, "
            "sqlite:///FILE or postgresql://USER@HOST/DB"
        ) from exc
    except ImportError as exc:
        hint = ("pip install 'specledger[postgres]'" if url.get_backend_name() == "postgresql"
                else "install it")
        raise DatabaseUnavailableError(
            f"cannot open {shown}: the Python driver '{exc.name}' of {url.drivername} is "
            f"not installed; {hint}, or name an installed driver (e.g. postgresql+psycopg://)"
        ) from exc
    except ArgumentError as exc:
        raise DatabaseUrlError(f"bad database URL {shown}: {exc}") from exc
    if engine.dialect.name == "sqlite":
        pragmas = _WRITER_PRAGMAS if writer else _READER_PRAGMAS

        @event.listens_for(engine, "connect")
        def _set_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            if writer:
                _wal(cursor)
            for pragma in pragmas:
                cursor.execute(pragma)
            cursor.close()

    elif engine.dialect.name == "postgresql" and not writer:

        @event.listens_for(engine, "connect")
        def _read_only(dbapi_conn: Any, _record: Any) -> None:
            # PostgreSQL's query_only: a reader that tried to write fails. Committed, since
            # a SET rolled back with the DBAPI's implicit transaction would be undone.
            cursor = dbapi_conn.cursor()
            cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            cursor.close()
            dbapi_conn.commit()

    return engine


def _wal(cursor: Any) -> None:
    """The file in WAL mode, which lets readers follow a live session while one writer
    appends. A file keeps the mode once set, so only the first opening of a new ledger
    sets it. Setting it takes the file's exclusive lock, and SQLite answers a contended
    switch with "database is locked" at once, without the busy wait: writers opening a new
    ledger together (tests/eventlog/test_many_writers.py) retry for `SQLITE_BUSY_S`."""
    if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
        return
    deadline = time.monotonic() + SQLITE_BUSY_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")  # an in-memory database stays "memory"
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


# synchronous=NORMAL is durable at every checkpoint without an fsync per commit (in WAL
# mode, which `_wal` sets first). Readers only ever read.
_WRITER_PRAGMAS = (
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
)
_READER_PRAGMAS = ("PRAGMA synchronous=NORMAL", "PRAGMA query_only=ON")


@contextmanager
def snapshot(engine: Engine) -> Iterator[Connection]:
    """A connection whose statements all read one snapshot of the database, for an answer
    that takes more than one (a session's row and the range of ids beside it): SQLite's
    deferred BEGIN, which the first read fixes; PostgreSQL's REPEATABLE READ. Without it
    each statement read the database as it was then, and a writer's commit between two
    gave an answer that was never true ("no session 19: known ids are 1..19")."""
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN")
        elif conn.dialect.name == "postgresql":
            conn.execution_options(isolation_level="REPEATABLE READ")
        yield conn


@contextmanager
def begin_waiting(engine: Engine, wait_s: float | None) -> Iterator[Connection]:
    """`engine.begin()` whose waits for locks end after `wait_s` seconds with an error
    (None: the engine's own wait, `SQLITE_BUSY_S` on SQLite)."""
    if wait_s is None:
        with engine.begin() as conn:
            yield conn
        return
    ms = max(1, round(wait_s * 1000))
    with engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        try:
            with conn.begin():
                if sqlite:
                    conn.exec_driver_sql(f"PRAGMA busy_timeout = {ms}")
                elif conn.dialect.name == "postgresql":
                    conn.exec_driver_sql(f"SET LOCAL lock_timeout = {ms}")
                yield conn
        finally:
            if sqlite:  # the pooled connection back to every other writer's wait
                conn.exec_driver_sql(f"PRAGMA busy_timeout = {round(SQLITE_BUSY_S * 1000)}")


def _stored_version(engine: Engine, shown: str) -> str | None:
    """The stored schema version; None for a database with no tables at all."""
    try:
        with snapshot(engine) as conn:
            return _schema_version(conn, shown)
    except OperationalError as exc:
        path = _sqlite_file(engine.url)
        why = _read_only(path)
        hint = f" ({shown} is read-only here: {why}; copy it somewhere writable)" if why else ""
        if path is not None and path.is_dir():
            hint = " (it is a directory: pass the path of a ledger file)"
        raise DatabaseUnavailableError(f"cannot use {shown}: {first_line(exc)}{hint}"
                                       ) from exc
    except DBAPIError as exc:
        raise NotASpecledgerDatabaseError(
            f"{shown} is not a specledger database: {first_line(exc)}"
        ) from exc


def _schema_version(conn: Connection, shown: str) -> str | None:
    inspector = inspect(conn)
    tables = inspector.get_table_names()
    if not tables:
        return None
    columns = {c["name"] for c in inspector.get_columns("meta")} if "meta" in tables else set()
    if not {"key", "value"} <= columns:
        raise NotASpecledgerDatabaseError(
            f"{shown} is not a specledger database (it has tables but no specledger meta "
            "table); pass another --db"
        )
    version = conn.scalar(select(meta.c.value).where(meta.c.key == "schema_version"))
    if version is None:
        raise NotASpecledgerDatabaseError(f"{shown} has no schema_version: not a specledger db")
    return str(version)


def _create_schema(engine: Engine, shown: str) -> str | None:
    """Create the tables and stamp the version; the version stored when we are done.

    Writers that start together on a new database race to create it, so a creator first
    takes the database's write lock (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory
    transaction lock) and looks again under it: the loser finds the winner's schema. The
    tables and the version row are one transaction (both databases' DDL is
    transactional), so a reader never sees a schema half made.
    """
    with _schema_locked(engine, f"create the schema in {shown}") as conn:
        found = _schema_version(conn, shown)
        if found is not None:
            return found
        metadata.create_all(conn)
        conn.execute(meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
        return str(SCHEMA_VERSION)


def _add_new_tables(engine: Engine, shown: str) -> None:
    """Create the tables this schema version gained after the ledger was made (`turns`),
    as its next writer opens it: under the lock `_create_schema` takes, so writers that
    open it together create them once."""
    with snapshot(engine) as conn:
        stored = set(inspect(conn).get_table_names())
    if stored >= metadata.tables.keys():
        return
    with _schema_locked(engine, f"add the new tables to {shown}") as conn:
        metadata.create_all(conn, checkfirst=True)


@contextmanager
def _schema_locked(engine: Engine, doing: str) -> Iterator[Connection]:
    """A transaction, free of interrupts, that holds the database's write lock from its
    start (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory transaction lock); a database
    error in it is said as `doing` failing."""
    try:
        with interrupts_deferred(), engine.begin() as conn:
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            elif conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:space, 0)"),
                             {"space": LOCK_SPACE})
            yield conn
    except DBAPIError as exc:
        raise DatabaseUnavailableError(f"cannot {doing}: {first_line(exc)}") from exc


def first_line(exc: BaseException) -> str:
    """The first line of what the database (or the system) said."""
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    lines = str(cause).strip().splitlines()
    return lines[0] if lines else type(cause).__name__
