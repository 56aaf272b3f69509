"""`watch --responses-from`: the answers the clients append are matched to the watched
requests as `import --responses` matches them, whether an answer is written before its
request's last log line or after it; a request whose answer does not come within the
wait is recorded without it, and said; a changed answer is the import's counter
mismatch."""

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.llama.ledger.record import record_log
from adapters.llama.ledger.responses import read_responses
from adapters.llama.log.sources import read_log
from eventlog import get_session, open_db
from eventlog.postmortem.analyze import postmortem_session
from eventlog.postmortem.finding import Kind
from specledger.api import session_turns
from specledger.observed import UnitJournal
from specledger.watch.loop import Watcher, WatchOptions
from tests.specledger.watch.helpers import drip, rows
from tests.specledger.watch.test_loop import FIELDS
from tests.specledger.watch.test_stream import FIXTURES, fixture_bytes


def _answers(name: str) -> list[dict[str, Any]]:
    return list(json.loads((FIXTURES / f"{name}.responses.json").read_text()))


def _append(path: Path, answers: list[dict[str, Any]]) -> None:
    with path.open("a") as out:
        out.writelines(json.dumps(a) + "\n" for a in answers)


def _watcher(tmp_path: Path, wait_s: float, said: list[str]) -> Watcher:
    log, answers = tmp_path / "s.log", tmp_path / "answers.jsonl"
    log.touch()
    answers.touch()
    return Watcher(WatchOptions(log=log, db=str(tmp_path / "l.db"), settle_s=0.0,
                                responses=answers, answer_wait_s=wait_s), said.append)


@pytest.mark.parametrize("name", ["two-slots", "mtp", "quiet"])
def test_answers_before_and_after_their_requests_are_matched_as_import_does(
        tmp_path: Path, name: str) -> None:
    said: list[str] = []
    w = _watcher(tmp_path, 60.0, said)
    answers = _answers(name)
    half = len(answers) // 2
    _append(tmp_path / "answers.jsonl", answers[:half])  # written before the log shows them
    drip(w, tmp_path / "s.log", fixture_bytes(name))
    waiting = w.tally.recorded
    assert waiting < len(answers)  # the rest wait for their answers, within the bound
    _append(tmp_path / "answers.jsonl", answers[half:])
    w.step()
    w.finish()
    assert (w.tally.answered, w.tally.unanswered, said) == (len(answers), 0, [])
    engine = open_db(w.opts.db, create=False)
    got = {}
    for sid, status, *_ in rows(w.opts.db):
        assert status == "finished"
        config = get_session(engine, sid).config
        assert config["source"]["responses"]["matched"] == 1
        assert config["watch"]["answer"] is not None
        turn = session_turns(engine, sid).ended[0]
        got[(turn.slot, turn.turn)] = turn
    imported = record_log(read_log(FIXTURES / f"{name}.log.gz"), UnitJournal(),
                          responses=read_responses(FIXTURES / f"{name}.responses.json").facts)
    assert imported.responses_matched == len(got)
    for t in imported.turns:
        assert {f: getattr(got[(t.slot, t.turn)], f) for f in FIELDS} == {
            f: getattr(t, f) for f in FIELDS}
    assert all(t.violations == 0 for t in got.values())


def test_a_request_whose_answer_never_comes_is_recorded_without_it_and_said(
        tmp_path: Path) -> None:
    said: list[str] = []
    w = _watcher(tmp_path, 0.0, said)
    drip(w, tmp_path / "s.log", fixture_bytes("two-slots"))
    w.finish()
    assert (w.tally.recorded, w.tally.answered, w.tally.unanswered) == (4, 0, 4)
    assert len(said) == 4 and all("recorded without it" in line for line in said)
    engine = open_db(w.opts.db, create=False)
    for sid, status, *_ in rows(w.opts.db):
        assert status == "finished"
        assert get_session(engine, sid).config["watch"]["answer"] is None


def test_a_changed_answer_is_an_engine_counter_mismatch(tmp_path: Path) -> None:
    said: list[str] = []
    w = _watcher(tmp_path, 60.0, said)
    answers = _answers("mtp")
    answers[1]["timings"]["draft_n_accepted"] += 2
    _append(tmp_path / "answers.jsonl", answers)
    drip(w, tmp_path / "s.log", fixture_bytes("mtp"))
    w.finish()
    assert w.tally.answered == 2
    assert len(said) == 1 and "engine_counter_mismatch" in said[0]
    engine = open_db(w.opts.db, create=False)
    second = rows(w.opts.db)[-1][0]
    found = {f.kind for f in postmortem_session(engine, second).findings}
    assert Kind.ENGINE_COUNTER_MISMATCH in found


def test_a_resumed_watch_holds_no_answer_already_taken(tmp_path: Path) -> None:
    data = fixture_bytes("two-slots")
    # Task 9 released, task 10 still being served.
    middle = data.index(b"\n", data.index(b"| task 9 | stop processing")) + 1
    answers = _answers("two-slots")
    _append(tmp_path / "answers.jsonl", answers)
    crashed = _watcher(tmp_path, 60.0, [])
    drip(crashed, tmp_path / "s.log", data[:middle])
    crashed.step()  # killed here
    assert crashed.tally.answered == 3
    again = _watcher(tmp_path, 60.0, [])
    assert again.answers is not None
    # Only task 10's answer is held again: those of tasks 0, 1 and 9 were taken.
    again.answers.feed.poll()
    assert len(again.answers.feed.held) == 1
    drip(again, tmp_path / "s.log", data[middle:], seed=1)
    again.finish()
    assert (again.tally.recorded, again.tally.answered, again.tally.unanswered) == (1, 1, 0)
    assert not again.answers.feed.held
    engine = open_db(again.opts.db, create=False)
    sid = rows(again.opts.db)[-1][0]
    assert session_turns(engine, sid).ended[0].violations == 0


def test_answers_truncated_before_they_were_read_are_said_lost(tmp_path: Path) -> None:
    """The answers file is followed as the log is: bytes truncated away unread are said,
    here as JSON (`--json`), naming the answers file."""
    log, answers = tmp_path / "s.log", tmp_path / "answers.jsonl"
    log.touch()
    _append(answers, _answers("two-slots"))
    docs: list[dict[str, Any]] = []
    w = Watcher(WatchOptions(log=log, db=str(tmp_path / "l.db"), settle_s=0.0,
                             responses=answers, read_limit=512), print, docs.append)
    w.step()
    assert w.answers is not None
    read = w.answers.feed.follower.cursor()
    assert read is not None and 0 < read.offset < answers.stat().st_size
    size = answers.stat().st_size
    with answers.open("r+b") as out:
        out.truncate(0)
    w.step()
    w.finish()
    assert docs == [{"lost": {"file": str(answers), "dev": read.dev, "ino": read.ino,
                              "offset": read.offset, "line": read.line,
                              "bytes": size - read.offset, "why": "truncated"}}]
    assert (w.tally.gaps, w.tally.lost_bytes) == (1, size - read.offset)


def test_a_request_read_again_takes_no_answer_and_holds_up_no_one(tmp_path: Path) -> None:
    """Task 1 (slot 0) was recorded with its answer before the crash; the resumed watch
    reads it again: it waits for no answer, so slot 0's next request is recorded as soon
    as its own answer is there, not when the watch stops."""
    data = fixture_bytes("two-slots")
    cut = data.index(b"\n", data.index(b"| task 1 | stop processing")) + 1
    _append(tmp_path / "answers.jsonl", _answers("two-slots"))
    crashed = _watcher(tmp_path, 60.0, [])
    drip(crashed, tmp_path / "s.log", data[:cut])
    crashed.step()  # killed here: task 1 recorded, task 0 in flight
    assert crashed.tally.answered == 1
    again = _watcher(tmp_path, 60.0, [])
    drip(again, tmp_path / "s.log", data[cut:], seed=1)
    again.step()
    assert (again.tally.skipped, again.tally.recorded, again.tally.answered) == (1, 3, 3)
    again.finish()
    assert sorted(task for *_, task, _ in rows(again.opts.db)) == [0, 1, 9, 10]
