"""A watched log is recorded request by request as `import` records it whole: the same
turns, the same findings, each request once, through a stop and a resume, a crash, a
server restart and a rotation, and a backlog many times what one poll reads through
rotations, `copytruncate` and a crash; what cannot be read is said; bounded by --keep,
--keep-for and the ring."""

import json
import shutil
from pathlib import Path

import pytest

from adapters.llama.ledger.fold import fold_tasks
from adapters.llama.ledger.record import record_log
from adapters.llama.ledger.rounds import accepted_drafts
from adapters.llama.log.reader import parse_log, parse_text
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
    assert second.intake.stream.server.n_slots == 2  # the start-up facts, read again on resume


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


def test_a_finding_the_ring_writes_names_its_own_session(tmp_path: Path) -> None:
    """Ring mode across a server restart (the log truncated: its line numbers start
    again): the ring writes what it held in log order, and the finding names the session
    its request was written to, not the last one the ring wrote with it; its hook gets
    the same."""
    log, db, hooked = tmp_path / "s.log", str(tmp_path / "l.db"), tmp_path / "hook.json"
    log.touch()
    docs: list[dict[str, object]] = []
    w = Watcher(WatchOptions(log=log, db=db, settle_s=0.0, ring=1000,
                             on_finding=f"cat > {hooked}"), lambda _: None, docs.append)
    first, second = fixture_bytes("two-slots"), fixture_bytes("edited-history")
    # The premise: the first run's last request ends on a later line than the finding's.
    assert first.count(b"\n") > second[:second.index(b"| task 11 | stop processing")].count(
        b"\n")
    drip(w, log, first)
    log.write_bytes(b"")  # the server restarted: O_TRUNC, the same file
    w.step()
    drip(w, log, second, seed=1)
    w.finish()
    [doc] = docs
    plain = tmp_path / "plain"
    plain.mkdir()
    watched(plain / "s.log", str(plain / "l.db"), "two-slots")
    once = [task for *_, task, _ in rows(str(plain / "l.db"))]
    # Written in log order: the first run's requests, then the second's.
    assert [task for *_, task, _ in rows(db)] == [*once, 0, 11]
    sid = next(s for s, _, _, task, _ in rows(db) if task == 11)
    assert (doc["kind"], doc["task"], doc["session"]) == ("history_reprefill", 11, sid)
    assert json.loads(hooked.read_text())["session"] == sid
    stored = postmortem_session(open_db(db, create=False), sid)
    assert "history_reprefill" in {f.kind.value for f in stored.findings}


def test_the_ring_holds_a_bounded_number_of_rounds(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.touch()
    w = Watcher(WatchOptions(log=log, db=str(tmp_path / "l.db"), settle_s=0.0, ring=5),
                lambda _: None)
    assert w.keep.ring is not None
    held = []
    for i in range(4):  # the same server's log, again and again: a restart each time
        log.write_bytes(b"")
        w.step()
        drip(w, log, fixture_bytes("two-slots"), seed=i)
        held.append(len(w.keep.ring))
    assert max(held) <= 2 * 2  # per slot: the newest request, and one more within 5 rounds
    w.finish()


def test_keep_prunes_the_oldest_sessions(db_url: str, tmp_path: Path) -> None:
    w = watched(tmp_path / "s.log", db_url, "two-slots", keep=2)
    assert w.tally.pruned == 2
    assert sorted(task for _, _, _, task, _ in rows(db_url)) == [9, 10]
    engine = open_db(db_url, create=False)
    assert [s.id for s in list_sessions(engine)] == [r[0] for r in rows(db_url)]


@pytest.mark.parametrize("name", ["two-slots", "chain-sampled", "eog-in-block"])
def test_metrics_count_what_the_ledger_holds(tmp_path: Path, name: str) -> None:
    """Every counter equals the ledger's figure: per drafter, and at each draft position
    the rounds that drafted a token there and those that accepted it (from each turn's
    draft profile: its speculative rounds' drafted and accepted counts)."""
    db = str(tmp_path / "l.db")
    w = watched(tmp_path / "s.log", db, name)
    engine = open_db(db, create=False)
    stored = [session_turns(engine, sid) for sid, *_ in rows(db)]
    turns = [s.ended[0] for s in stored]
    m = w.report.metrics
    assert m.value("specledger_watch_requests_total", status="finished") == len(turns) > 1
    assert m.value("specledger_watch_rounds_total") == sum(t.rounds for t in turns)
    # Per drafter: the rounds the import's fold gives each (the log names the drafter).
    spec = [r for t in fold_tasks(read_log(FIXTURES / f"{name}.log.gz").records).tasks
            for r in t.rounds if r.complete and r.speculative]
    drafters = {r.spec_type for r in spec}
    assert None not in drafters
    for d in drafters:
        assert m.value("specledger_watch_drafted_tokens_total", drafter=d) == sum(
            r.drafted for r in spec if r.spec_type == d)
        assert m.value("specledger_watch_accepted_tokens_total", drafter=d) == sum(
            accepted_drafts(r) for r in spec if r.spec_type == d)
    assert sum(m.value("specledger_watch_drafted_tokens_total", drafter=d)
               for d in drafters) == sum(t.drafted for t in turns)
    assert sum(m.value("specledger_watch_accepted_tokens_total", drafter=d)
               for d in drafters) == sum(t.accepted for t in turns)
    rounds = [r for s in stored for p in s.profiles.values() for r in p.rounds]
    longest = max(d for d, _ in rounds)
    assert 0 < sum(a for _, a in rounds) < sum(d for d, _ in rounds)  # some, not all
    for pos in range(longest + 1):
        assert m.value("specledger_watch_position_drafted_total", position=str(pos)) == sum(
            d > pos for d, _ in rounds), pos
        assert m.value("specledger_watch_position_accepted_total", position=str(pos)) == sum(
            a > pos for _, a in rounds), pos


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
    assert w.intake.stream.server.n_slots == 2


def test_a_failing_hook_is_said_and_counted(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    w = watched(tmp_path / "s.log", str(tmp_path / "l.db"), "edited-history",
                on_finding="echo paging is down >&2; exit 3")
    assert w.report.hook is not None and w.report.hook.failed == 1
    assert "failed: exit 3: paging is down" in capsys.readouterr().err
    assert w.tally.recorded == 2  # the watch went on


SMALL = 4096  # bytes a poll reads in the backlog tests: each fixture is 40-75 times more


def _idle(w: Watcher) -> None:
    """Step `w` until a step reads nothing."""
    while w.step():
        pass


def test_a_backlog_through_a_rotation_and_a_copytruncate_is_recorded_once(
        tmp_path: Path) -> None:
    """A burst lands and the log is rotated at once, then copied and truncated while the
    watch is still far behind: each request of the three server runs is recorded once,
    whole, and nothing is said lost."""
    log, db = tmp_path / "s.log", str(tmp_path / "l.db")
    log.touch()
    said: list[str] = []
    w = Watcher(WatchOptions(log=log, db=db, settle_s=0.0, read_limit=SMALL), said.append)
    log.write_bytes(fixture_bytes("two-slots"))
    w.step()
    log.rename(tmp_path / "s.log.1")
    log.write_bytes(fixture_bytes("mtp"))
    w.step()  # the new file is seen, and waits behind the old one
    (tmp_path / "s.log.1").rename(tmp_path / "s.log.2")
    shutil.copyfile(log, tmp_path / "s.log.1")  # copytruncate
    log.write_bytes(fixture_bytes("ngram-mod"))  # shorter: the file was truncated
    _idle(w)
    w.finish()
    assert w.tally.switches == ["rotated", "truncated"]
    assert [status for _, status, *_ in rows(db)] == ["finished"] * 8
    assert len({key for *_, key in rows(db)}) == 8
    assert (w.tally.gaps, said) == (0, [])


@pytest.mark.parametrize("recorded", [0, 2])
def test_a_crash_behind_a_backlog_and_a_rotation_meanwhile_lose_nothing(
        tmp_path: Path, recorded: int) -> None:
    """Killed while catching up (before any request was recorded, or after two); the log
    rotated before the next watch started: it resumes in the rotated file, records what
    the first did not, then reads the new file."""
    log, db = tmp_path / "s.log", str(tmp_path / "l.db")
    log.write_bytes(fixture_bytes("two-slots"))
    first = Watcher(WatchOptions(log=log, db=db, settle_s=0.0, read_limit=SMALL),
                    lambda _: None)
    assert first.step()
    while first.tally.recorded < recorded:
        assert first.step()
    assert first.tally.recorded == recorded  # killed here, behind
    log.rename(tmp_path / "s.log.1")
    log.write_bytes(fixture_bytes("mtp"))
    again = Watcher(WatchOptions(log=log, db=db, settle_s=0.0, read_limit=SMALL),
                    lambda _: None)
    assert again.intake.follower.resumed
    _idle(again)
    again.finish()
    assert [status for _, status, *_ in rows(db)] == ["finished"] * 6
    assert len({key for *_, key in rows(db)}) == 6
    assert first.tally.recorded + again.tally.recorded == 6
    assert again.tally.switches == ["rotated"] and again.tally.gaps == 0


def test_bytes_truncated_before_they_were_read_are_said_and_counted(tmp_path: Path) -> None:
    log, db = tmp_path / "s.log", str(tmp_path / "l.db")
    data = fixture_bytes("two-slots")
    log.write_bytes(data)
    said: list[str] = []
    w = Watcher(WatchOptions(log=log, db=db, settle_s=0.0, read_limit=SMALL), said.append)
    w.step()
    read = w.intake.follower.cursor()
    assert read is not None and read.offset < len(data)
    with log.open("r+b") as out:  # truncated in place, nothing copied
        out.truncate(0)
    w.step()  # said now, not when the watch stops
    lost = len(data) - read.offset
    assert (w.tally.gaps, w.tally.lost_bytes) == (1, lost)
    assert said == [f"{log}: lost {lost} byte(s) from byte {read.offset} (line {read.line}) "
                    f"of the file {read.dev}/{read.ino}: it was truncated or rewritten before "
                    "it was read to its end, and no copy of its unread bytes is beside it"]
    assert w.report.metrics.value("specledger_watch_lost_bytes_total") == lost
    assert w.report.metrics.value("specledger_watch_gaps_total", why="truncated") == 1
    w.finish()
    assert w.tally.gaps == 1


def test_a_resume_re_reads_a_recorded_request_and_skips_it(tmp_path: Path) -> None:
    """Task 1 started after task 0 and was released first: a watch killed then resumes at
    task 0's first line, reads task 1 again, and must not record it twice."""
    log, db = tmp_path / "s.log", str(tmp_path / "l.db")
    data = fixture_bytes("two-slots")
    cut = data.index(b"\n", data.index(b"| task 1 | stop processing")) + 1
    assert data.index(b"| task 1 | processing task") > data.index(b"| task 0 | processing")
    log.touch()
    crashed = Watcher(WatchOptions(log=log, db=db, settle_s=0.0), lambda _: None)
    drip(crashed, log, data[:cut])
    crashed.step()  # killed here: task 1 recorded, task 0 in flight
    assert [task for *_, task, _ in rows(db)] == [1]
    again = Watcher(WatchOptions(log=log, db=db, settle_s=0.0), lambda _: None)
    drip(again, log, data[cut:], seed=3)
    again.finish()
    assert (again.tally.skipped, again.tally.recorded) == (1, 3)
    assert sorted(task for *_, task, _ in rows(db)) == [0, 1, 9, 10]


def test_a_server_restarted_into_the_same_file_is_recorded_whole(tmp_path: Path) -> None:
    """`>> server.log` across a restart: the second server numbers its tasks from 0 again.
    The first piece read holds the first server's last requests and the second's start
    of its own task 10, whose end comes in the next piece: every request of both is
    recorded once, each server's as import records its run."""
    log, db = tmp_path / "s.log", str(tmp_path / "l.db")
    one = fixture_bytes("two-slots")
    data = one * 2
    cut = len(one) + one.index(b"\n", one.index(b"| task 10 | processing task")) + 1
    log.write_bytes(data[:cut])
    w = Watcher(WatchOptions(log=log, db=db, settle_s=0.0), lambda _: None)
    _idle(w)
    with log.open("ab") as out:
        out.write(data[cut:])
    _idle(w)
    w.finish()
    assert w.tally.switches == ["restarted"]
    assert sorted(task for *_, task, _ in rows(db)) == [0, 0, 1, 1, 9, 9, 10, 10]
    assert len({key for *_, key in rows(db)}) == 8
    assert {status for _, status, *_ in rows(db)} == {"finished"}
    engine = open_db(db, create=False)
    got = [session_turns(engine, sid).ended[0] for sid, *_ in rows(db)]
    imported = [t for run in parse_text(data.decode()).runs
                for t in record_log(run, UnitJournal()).turns]
    assert sorted((t.slot, t.turn, t.kept_tokens, t.generated_tokens) for t in got) == sorted(
        (t.slot, t.turn, t.kept_tokens, t.generated_tokens) for t in imported)


def test_a_resumed_watch_does_not_take_an_unseen_slot_for_empty(tmp_path: Path) -> None:
    """Stopped after slot 0's first request, resumed: slot 0's next request re-prefills an
    edited history. What slot 0 held is not known to this watch: its f_keep is the
    server's own (not 1, as if the slot had been empty), and the re-prefill is the log's,
    as import finds them over the whole log."""
    log, db = tmp_path / "s.log", str(tmp_path / "l.db")
    data = fixture_bytes("edited-history")
    middle = data.index(b"\n", data.index(b"| task 0 | stop processing")) + 1
    log.touch()
    first = Watcher(WatchOptions(log=log, db=db, settle_s=0.0), lambda _: None)
    drip(first, log, data[:middle])
    first.finish()
    again = Watcher(WatchOptions(log=log, db=db, settle_s=0.0), lambda _: None)
    drip(again, log, data[middle:], seed=1)
    again.finish()
    engine = open_db(db, create=False)
    turn = session_turns(engine, rows(db)[-1][0]).ended[0]
    whole = record_log(read_log(FIXTURES / "edited-history.log.gz"), UnitJournal()).turns
    edited = next(t for t in whole if t.reprefill_tokens)
    assert (turn.ctx_restores, turn.reprefill_tokens) == (1, edited.reprefill_tokens)
    assert turn.f_keep == pytest.approx(edited.f_keep, abs=1e-3) and turn.f_keep < 1
