"""A watched log is recorded request by request as `import` records it whole: the same
turns, the same findings, each request once, through a stop and a resume, a crash, a
server restart and a rotation; bounded by --keep and by the ring."""

import json
from pathlib import Path

import pytest

from adapters.llama.ledger import record_log
from adapters.llama.log.reader import parse_log
from adapters.llama.log.sources import read_log
from eventlog import list_sessions, open_db
from eventlog.postmortem.analyze import postmortem_session
from eventlog.postmortem.finding import Severity
from specledger.api import session_turns
from specledger.observed import UnitJournal
from specledger.watch.loop import Watcher, WatchOptions
from specledger.watch.store import load_cursor
from tests.specledger.watch.helpers import drip, rows, watched
from tests.specledger.watch.test_stream import FIXTURES, fixture_bytes

FIELDS = ("prompt_tokens", "generated_tokens", "rounds", "drafted", "accepted", "restores",
          "ctx_restores", "reprefill_tokens", "kept_tokens", "stray_tokens", "violations")


@pytest.mark.parametrize("name", ["two-slots", "edited-history", "ngram-mod", "eog-in-block",
                                  "quiet"])
def test_requests_are_the_turns_import_records(tmp_path: Path, name: str) -> None:
    db = str(tmp_path / "l.db")
    watched(tmp_path / "s.log", db, name)
    engine = open_db(db, create=False)
    got = {}
    for sid, status, *_ in rows(db):
        assert status == "finished"
        got_turns = session_turns(engine, sid)
        turns = got_turns.ended
        assert len(turns) == 1 and not got_turns.partial
        got[(turns[0].slot, turns[0].turn)] = turns[0]
    imported = record_log(read_log(FIXTURES / f"{name}.log.gz"), UnitJournal()).turns
    assert len(got) == len(imported)
    for t in imported:
        assert {f: getattr(got[(t.slot, t.turn)], f) for f in FIELDS} == {
            f: getattr(t, f) for f in FIELDS}


def test_a_finding_is_printed_as_its_request_lands(tmp_path: Path) -> None:
    log, said = tmp_path / "s.log", []
    log.touch()
    w = Watcher(WatchOptions(log=log, db=str(tmp_path / "l.db"), settle_s=0.0), said.append)
    data = fixture_bytes("edited-history")
    second = data.index(b"| task 11 | stop processing")  # the edited turn's release line
    cut = data.index(b"\n", second) + 1
    drip(w, log, data[:cut])
    w.step()  # the release line is read: the turn is recorded and judged now, not later
    assert len(said) == 1 and "slot 0 turn 2" in said[0] and "history_reprefill" in said[0]
    assert "reprefill_tokens=22" in said[0]
    drip(w, log, data[cut:])
    w.finish()
    assert w.tally.findings == 1
    sid = rows(str(tmp_path / "l.db"))[-1][0]
    stored = postmortem_session(open_db(str(tmp_path / "l.db"), create=False), sid)
    assert "history_reprefill" in {f.kind.value for f in stored.findings}


def test_stop_records_the_request_in_flight_and_resume_records_each_once(
        tmp_path: Path) -> None:
    log, db = tmp_path / "s.log", str(tmp_path / "l.db")
    data = fixture_bytes("two-slots")
    middle = data.index(b"| task 9 | processing task")  # tasks 0 and 1 done, 9 begun
    middle = data.index(b"\n", middle + 200) + 1
    log.touch()
    first = Watcher(WatchOptions(log=log, db=db, settle_s=0.0), lambda _: None)
    drip(first, log, data[:middle])
    first.finish()
    assert (first.tally.recorded, first.tally.incomplete) == (3, 1)
    assert first.tally.findings == 0  # the watch's own stop is no incident to report
    cursor = load_cursor(open_db(db, create=False), str(log))
    assert cursor is not None and cursor.offset == middle
    second = Watcher(WatchOptions(log=log, db=db, settle_s=0.0), lambda _: None)
    assert second.tally.resumed_at == middle
    drip(second, log, data[middle:], seed=1)
    second.finish()
    recorded = rows(db)
    assert sorted((slot, task, status) for _, status, slot, task, _ in recorded) == [
        (0, 1, "finished"), (0, 10, "finished"), (1, 0, "finished"), (1, 9, "failed")]
    assert second.stream.server.n_slots == 2  # the start-up facts, read again on resume


def test_a_crash_resumes_at_the_oldest_request_in_flight_and_skips_the_recorded(
        tmp_path: Path) -> None:
    log, db = tmp_path / "s.log", str(tmp_path / "l.db")
    data = fixture_bytes("two-slots")
    # Task 9 released, task 10 still being served.
    middle = data.index(b"\n", data.index(b"| task 9 | stop processing")) + 1
    log.touch()
    crashed = Watcher(WatchOptions(log=log, db=db, settle_s=0.0), lambda _: None)
    drip(crashed, log, data[:middle])
    crashed.step()  # killed here: no finish, nothing recorded as incomplete
    assert crashed.tally.recorded == 3
    cursor = load_cursor(open_db(db, create=False), str(log))
    assert cursor is not None and cursor.offset == data.index(
        b"0.", data.rfind(b"\n", 0, data.index(b"| task 10 | processing task")))
    again = Watcher(WatchOptions(log=log, db=db, settle_s=0.0), lambda _: None)
    drip(again, log, data[middle:], seed=2)
    again.finish()
    assert again.tally.recorded == 1
    assert sorted((task, status) for _, status, _, task, _ in rows(db)) == [
        (0, "finished"), (1, "finished"), (9, "finished"), (10, "finished")]


def test_a_restart_in_place_and_a_rotation(tmp_path: Path) -> None:
    log, db = tmp_path / "s.log", str(tmp_path / "l.db")
    log.touch()
    w = Watcher(WatchOptions(log=log, db=db, settle_s=0.0), lambda _: None)
    drip(w, log, fixture_bytes("two-slots"))
    log.write_bytes(b"")  # the server restarted: O_TRUNC, the same file
    w.step()
    drip(w, log, fixture_bytes("mtp"), seed=1)
    log.rename(tmp_path / "s.log.1")  # rotated, and a new server writes a new file
    drip(w, tmp_path / "s.log", fixture_bytes("ngram-mod"), seed=2)
    w.finish()
    assert w.tally.switches == ["truncated", "rotated"]
    assert [status for _, status, *_ in rows(db)] == ["finished"] * 8
    assert len({key for *_, key in rows(db)}) == 8


def test_ring_mode_writes_only_when_a_finding_fires(tmp_path: Path) -> None:
    quiet = watched(tmp_path / "a.log", str(tmp_path / "a.db"), "two-slots", ring=3)
    assert quiet.tally.recorded == 0 and quiet.tally.ring_dropped > 0
    assert rows(str(tmp_path / "a.db")) == []
    fired = watched(tmp_path / "b.log", str(tmp_path / "b.db"), "edited-history", ring=1000)
    assert fired.tally.findings == 1
    assert [task for _, _, _, task, _ in rows(str(tmp_path / "b.db"))] == [0, 11]
    # A warning does not fire a ring that waits for errors.
    waiting = watched(tmp_path / "c.log", str(tmp_path / "c.db"), "edited-history", ring=1000,
                      severity=Severity.ERROR)
    assert (waiting.tally.findings, waiting.tally.recorded) == (0, 0)


def test_the_ring_holds_a_bounded_number_of_rounds(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.touch()
    w = Watcher(WatchOptions(log=log, db=str(tmp_path / "l.db"), settle_s=0.0, ring=5),
                lambda _: None)
    assert w.ring is not None
    held = []
    for i in range(4):  # the same server's log, again and again: a restart each time
        log.write_bytes(b"")
        w.step()
        drip(w, log, fixture_bytes("two-slots"), seed=i)
        held.append(len(w.ring))
    assert max(held) <= 2 * 2  # per slot: the newest request, and one more within 5 rounds
    w.finish()


def test_keep_prunes_the_oldest_sessions(db_url: str, tmp_path: Path) -> None:
    w = watched(tmp_path / "s.log", db_url, "two-slots", keep=2)
    assert w.tally.pruned == 2
    assert sorted(task for _, _, _, task, _ in rows(db_url)) == [9, 10]
    engine = open_db(db_url, create=False)
    assert [s.id for s in list_sessions(engine)] == [r[0] for r in rows(db_url)]


def test_metrics_count_what_the_ledger_holds(tmp_path: Path) -> None:
    db = str(tmp_path / "l.db")
    w = watched(tmp_path / "s.log", db, "two-slots")
    engine = open_db(db, create=False)
    turns = [session_turns(engine, sid).ended[0] for sid, *_ in rows(db)]
    m = w.metrics
    assert m.value("specledger_watch_requests_total", status="finished") == len(turns) == 4
    assert m.value("specledger_watch_rounds_total") == sum(t.rounds for t in turns)
    assert m.value("specledger_watch_drafted_tokens_total", drafter="draft-mtp") == sum(
        t.drafted for t in turns)
    assert m.value("specledger_watch_accepted_tokens_total", drafter="draft-mtp") == sum(
        t.accepted for t in turns)
    assert m.value("specledger_watch_position_accepted_total", position="0") <= m.value(
        "specledger_watch_position_drafted_total", position="0")


def test_on_finding_gets_the_finding_as_json(tmp_path: Path) -> None:
    out = tmp_path / "found.jsonl"
    watched(tmp_path / "s.log", str(tmp_path / "l.db"), "edited-history",
            on_finding=f"cat >> {out}")
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(d["kind"], d["slot"], d["turn"], d["task"]) for d in docs] == [
        ("history_reprefill", 0, 2, 11)]
    assert docs[0]["numbers"]["reprefill_tokens"] == 22


def test_a_log_with_no_request_records_nothing(tmp_path: Path) -> None:
    data = fixture_bytes("two-slots")
    head = data[:data.index(b"\n", data.index(b"all slots are idle")) + 1]
    assert not any(r.kind.value == "task_started" for r in parse_log(head.decode()).records)
    log, db = tmp_path / "s.log", str(tmp_path / "l.db")
    log.write_bytes(head)
    w = Watcher(WatchOptions(log=log, db=db, settle_s=0.0), lambda _: None)
    w.step()
    w.finish()
    assert w.tally.recorded == 0 and rows(db) == []
    assert w.stream.server.n_slots == 2


def test_a_failing_hook_is_said_and_counted(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    w = watched(tmp_path / "s.log", str(tmp_path / "l.db"), "edited-history",
                on_finding="echo paging is down >&2; exit 3")
    assert w.hook is not None and w.hook.failed == 1
    assert "failed: exit 3: paging is down" in capsys.readouterr().err
    assert w.tally.recorded == 2  # the watch went on
