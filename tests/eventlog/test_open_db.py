"""open_db: creation, validation, and the errors for everything that is not our database."""

import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import text, update
from sqlalchemy.exc import DBAPIError

from eventlog import (
    DatabaseUnavailableError,
    NotASpecledgerDatabaseError,
    UnknownSessionError,
    create_session,
    list_sessions,
    open_db,
)
from eventlog.errors import EmptyLedgerError
from eventlog.schema import SCHEMA_VERSION, meta
from fsm.errors import SpecledgerError
from tests.eventlog.holds import creation_held


def test_writer_creates_a_wal_database_that_readers_open(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "log.db"
    writer = open_db(str(path), True)
    with writer.connect() as conn:
        assert conn.scalar(text("PRAGMA journal_mode")) == "wal"
        assert conn.scalar(text("PRAGMA synchronous")) == 1  # NORMAL
    create_session(writer, config={}, backend="sim", seeds={}, code_version="t")
    reader = open_db(f"sqlite:///{path}", False)
    assert [s.id for s in list_sessions(reader)] == [1]
    assert open_db(str(path), True).url == writer.url  # reopening is fine


def test_readers_never_write(db_url: str) -> None:
    open_db(db_url, True)
    reader = open_db(db_url, False)
    with pytest.raises(DBAPIError, match=r"readonly|read-only transaction"):
        create_session(reader, config={}, backend="sim", seeds={}, code_version="t")


def test_missing_file_is_not_created_by_a_reader(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    with pytest.raises(DatabaseUnavailableError, match=r"no database at .*absent\.db"):
        open_db(str(path), False)
    assert not path.exists()


def test_unwritable_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("a file, not a directory")
    with pytest.raises(DatabaseUnavailableError, match="cannot create"):
        open_db(str(blocker / "sub" / "log.db"), True)


@pytest.mark.parametrize("create", [False, True])
def test_a_text_file_is_not_a_specledger_database(tmp_path: Path, create: bool) -> None:
    path = tmp_path / "notes.db"
    path.write_text("hello, this is not sqlite\n" * 100)
    before = path.read_bytes()
    with pytest.raises(NotASpecledgerDatabaseError, match="not a specledger database"):
        open_db(str(path), create)
    assert path.read_bytes() == before


@pytest.mark.parametrize("create", [False, True])
def test_a_foreign_sqlite_database_is_refused_untouched(tmp_path: Path, create: bool) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE meta (name TEXT)")
    with pytest.raises(NotASpecledgerDatabaseError, match="no specledger meta table"):
        open_db(str(path), create)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("meta",)]


def test_another_schema_version_is_refused(db_url: str) -> None:
    with open_db(db_url, True).begin() as conn:
        conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="99"))
    with pytest.raises(NotASpecledgerDatabaseError, match="schema version 99"):
        open_db(db_url, False)


def test_a_ledger_of_an_older_schema_is_refused_in_one_line(db_url: str) -> None:
    with open_db(db_url, True).begin() as conn:
        conn.execute(update(meta).where(meta.c.key == "schema_version").values(
            value=str(SCHEMA_VERSION - 1)))
    for create in (False, True):
        with pytest.raises(NotASpecledgerDatabaseError) as err:
            open_db(db_url, create)
        message = str(err.value)
        assert "\n" not in message and "written by an older specledger" in message
        assert f"reads version {SCHEMA_VERSION}" in message


def test_an_empty_file_has_no_sessions_for_readers_and_is_initialised_by_writers(
        tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with pytest.raises(EmptyLedgerError, match="has no sessions yet") as err:
        open_db(str(path), False)
    assert isinstance(err.value, UnknownSessionError)
    open_db(str(path), True)
    assert list_sessions(open_db(str(path), False)) == []


def test_a_reader_sees_a_ledger_being_created_whole_or_not_at_all(db_url: str) -> None:
    """The first writer creates the tables and stamps the version in one transaction;
    held between the two, a reader sees a ledger with no sessions yet (once "is empty:
    not a specledger database", while the writer made it), then the whole schema."""
    with creation_held(db_url), pytest.raises(EmptyLedgerError, match="has no sessions yet"):
        open_db(db_url, False)
    assert list_sessions(open_db(db_url, False)) == []


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://nobody:secret@127.0.0.1:1/x", "cannot (open|use) postgresql"),
        ("nosuchdialect://x", "unknown database dialect 'nosuchdialect'"),
        ("://nothing", "cannot parse database URL"),
    ],
)
def test_bad_urls(url: str, message: str) -> None:
    with pytest.raises(DatabaseUnavailableError, match=message) as caught:
        open_db(url, False)
    assert "secret" not in str(caught.value)
    assert isinstance(caught.value, SpecledgerError)
    assert "\n" not in str(caught.value)



def test_a_writer_waits_for_the_write_lock_to_switch_a_new_ledger_to_wal(
        tmp_path: Path) -> None:
    """Switching a new file to WAL takes its exclusive lock; while another writer holds the
    write lock, SQLite refuses the switch at once, without the busy wait (the race of
    writers opening one new ledger together): the writer waits its turn instead."""
    path = tmp_path / "new.db"
    path.touch()
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, holder.execute, ("COMMIT",))
    release.start()
    try:
        engine = open_db(str(path), True)
        assert create_session(engine, config={}, backend="sim", seeds={},
                              code_version="t") == 1
    finally:
        release.join()
        holder.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
