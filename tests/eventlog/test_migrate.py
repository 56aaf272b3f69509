"""`specledger migrate`: a version-1 ledger becomes this version with every event, and the
same postmortem, and an interrupted migration leaves it as it was."""

import pytest
from sqlalchemy import Engine, inspect, text, update
from sqlalchemy.exc import DBAPIError

from engine.config import RunConfig
from eventlog import NotASpecledgerDatabaseError, open_db
from eventlog.jsoncodec import encode_json
from eventlog.migrate import V1_EVENTS, migrate
from eventlog.postmortem import postmortem_session
from eventlog.reader import scan_events
from eventlog.schema import SCHEMA_VERSION, meta
from fsm.event import Event
from specledger.api import run_session
from specledger.cli.main import main

CONFIG = RunConfig(eog_policy="legacy", replay_policy="reverify", tie_flip_rate=0.3,
                   acceptance=0.9, turns=2, seed=3)


def _as_version_1(engine: Engine, evs: list[Event], session_id: int) -> None:
    """Rewrite the ledger's events table as version 1 stored it."""
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE events"))
        V1_EVENTS.create(conn)
        conn.execute(V1_EVENTS.insert(), [
            {"session_id": session_id, "seq": e.seq, "slot": e.slot, "turn": e.turn,
             "round": e.round, "trigger": e.trigger.value, "source": e.source.value,
             "dest": e.dest.value, "t": e.t, "duration": e.duration, "payload": e.payload}
            for e in evs])
        conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="1"))


@pytest.fixture
def old_ledger(db_url: str) -> tuple[str, list[Event], dict[str, object]]:
    """A version-1 ledger of one session: its URL, its events and its postmortem."""
    sid = run_session(CONFIG, db_url).session_id
    engine = open_db(db_url, create=False)
    evs = list(scan_events(engine, sid))
    before = postmortem_session(engine, sid).to_dict()
    engine.dispose()
    writer = open_db(db_url, create=True)
    _as_version_1(writer, evs, sid)
    writer.dispose()
    return db_url, evs, before


def test_a_version_1_ledger_is_migrated_with_every_event(
        old_ledger: tuple[str, list[Event], dict[str, object]]) -> None:
    url, evs, before = old_ledger
    with pytest.raises(NotASpecledgerDatabaseError, match="specledger migrate --db"):
        open_db(url, create=False)
    seen: list[tuple[int, int]] = []
    done = migrate(url, lambda n, total: seen.append((n, total)), batch=100)
    assert (done.from_version, done.to_version, done.events) == (1, SCHEMA_VERSION, len(evs))
    assert seen[-1] == (len(evs), len(evs)) and len(seen) > 1
    engine = open_db(url, create=False)
    assert list(scan_events(engine, 1)) == evs
    assert postmortem_session(engine, 1).to_dict() == before
    keys = inspect(engine)  # named as a new ledger's (PostgreSQL names them)
    assert keys.get_pk_constraint("events")["name"] in (None, "events_pkey")
    assert {fk["name"] for fk in keys.get_foreign_keys("events")} <= {
        None, "events_session_id_fkey"}
    assert migrate(url).events == 0  # a second run finds nothing to do


def test_an_interrupted_migration_changes_nothing(
        old_ledger: tuple[str, list[Event], dict[str, object]]) -> None:
    url, evs, _ = old_ledger

    def crash(n: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        migrate(url, crash, batch=100)
    with pytest.raises(NotASpecledgerDatabaseError, match="version 1"):
        open_db(url, create=False)
    assert migrate(url).events == len(evs)
    assert list(scan_events(open_db(url, create=False), 1)) == evs


def test_the_migrate_command_says_what_it_did(
        old_ledger: tuple[str, list[Event], dict[str, object]],
        capsys: pytest.CaptureFixture[str]) -> None:
    url, evs, _ = old_ledger
    assert main(["migrate", "--db", url]) == 0
    assert f"schema version 1 -> {SCHEMA_VERSION}, {len(evs):,} events migrated" in (
        capsys.readouterr().out)
    assert main(["migrate", "--db", url]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_a_pre_standard_nan_payload_is_migrated_to_the_standard_form(db_url: str) -> None:
    """A version-1 NaN: on SQLite Python's bare `NaN` token; PostgreSQL's json refused that
    token, so there a NaN was stored by its name. Both migrate to the name in a string,
    and every other event is untouched."""
    sid = run_session(RunConfig(turns=1, seed=1), db_url).session_id
    engine = open_db(db_url, create=False)
    evs = list(scan_events(engine, sid))
    engine.dispose()
    writer = open_db(db_url, create=True)
    _as_version_1(writer, evs, sid)
    update_first = "UPDATE events SET payload = {} WHERE seq = :s"
    with writer.begin() as conn:
        if writer.dialect.name == "sqlite":
            conn.execute(text(update_first.format(":p")),
                         {"p": '{"f_keep": NaN}', "s": evs[0].seq})
        else:
            with pytest.raises(DBAPIError, match="NaN"), conn.begin_nested():
                conn.execute(text(update_first.format("CAST(:p AS json)")),
                             {"p": '{"f_keep": NaN}', "s": evs[0].seq})
            conn.execute(text(update_first.format("CAST(:p AS json)")),
                         {"p": '{"f_keep": "NaN"}', "s": evs[0].seq})
    writer.dispose()
    assert migrate(db_url).events == len(evs)
    first, *rest = scan_events(open_db(db_url, create=False), sid)
    assert first.payload == {"f_keep": "NaN"}
    assert encode_json(first.payload) == '{"f_keep":"NaN"}'
    assert rest == evs[1:]
