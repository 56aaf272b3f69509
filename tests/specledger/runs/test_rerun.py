"""Re-execution, counterfactuals and diff through the CLI: JSON shapes, exit statuses,
lineage, and a tampered log caught at the exact event."""

import json
from dataclasses import replace

import pytest
from sqlalchemy import update

from eventlog import get_session, open_db, scan_events
from eventlog.inserts import event_row
from eventlog.schema import events
from fsm.states import Trigger
from specledger.cli.main import main
from tests.specledger.helpers import exit_status

SMALL = ["--backend", "sim", "--turns", "2", "--prompt-tokens", "64",
         "--question-tokens", "8", "--answer-tokens", "40"]


def _run(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> dict:
    assert main(list(argv)) == status
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def recorded(db_url: str, capsys: pytest.CaptureFixture[str]) -> tuple[str, int]:
    db = db_url
    sid = _run(capsys, "run", "--db", db, "--json", "--eog-policy", "legacy", *SMALL)["session"]
    return db, sid


def test_rerun_reproduces_every_event_as_a_child_session(
    recorded: tuple[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    db, sid = recorded
    doc = _run(capsys, "replay", str(sid), "--db", db, "--rerun", "--json")
    assert doc["mode"] == "reexecution" and doc["reproduced"] is True
    assert doc["divergence"] is None and doc["set"] == {} and doc["turns"] == []
    engine = open_db(db, create=False)
    child = get_session(engine, doc["session"])
    assert child.parent_id == sid and child.config == get_session(engine, sid).config
    assert doc["compared"] == child.events == get_session(engine, sid).events
    same = _run(capsys, "diff", str(sid), str(doc["session"]), "--db", db, "--json")
    assert same["identical"] is True and same["divergence"] is None
    assert all(t["same_output"] for t in same["turns"])


def test_a_tampered_log_stops_the_rerun_at_that_event(
    recorded: tuple[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    db, sid = recorded
    engine = open_db(db, create=True)
    target = [e for e in scan_events(engine, sid) if e.trigger is Trigger.COMMIT][5]
    with engine.begin() as conn:
        conn.execute(update(events).where(events.c.session_id == sid,
                                          events.c.seq == target.seq)
                     .values(body=json.loads(event_row(sid, replace(
                         target, payload={**target.payload, "digest": "feedfacefeedface"}))[-1])))
    doc = _run(capsys, "replay", str(sid), "--db", db, "--rerun", "--json", status=1)
    d = doc["divergence"]
    assert doc["reproduced"] is False
    assert (d["seq"], d["turn"], d["round"], d["field"]) == (target.seq, target.turn,
                                                            target.round, "payload.digest")
    assert (d["expected"], d["actual"]) == ("feedfacefeedface", target.payload["digest"])
    assert [e["seq"] for e in d["before"]] == list(range(target.seq - 5, target.seq))
    assert d["actual_event"]["trigger"] == "commit"
    # the re-run stopped there: the child holds the events through it and its failure
    child = list(scan_events(engine, doc["session"]))
    assert child[-1].trigger is Trigger.FAIL and child[-2].seq == target.seq
    assert get_session(engine, doc["session"]).status.value == "failed"
    skip = _run(capsys, "replay", str(sid), "--db", db, "--rerun", "--ignore-digests",
                "--json")
    assert skip["reproduced"] is True and skip["tolerance"]["digests"] == "skipped"


def test_counterfactual_is_compared_turn_by_turn(
    recorded: tuple[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    db, sid = recorded
    doc = _run(capsys, "replay", str(sid), "--db", db, "--rerun", "--set",
               "eog-policy=truncate", "--json")
    assert doc["mode"] == "counterfactual" and doc["set"] == {"eog_policy": "truncate"}
    assert doc["divergence"]["seq"] > 1  # the branch point, after a shared prefix
    turns = {t["turn"]: t for t in doc["turns"]}
    assert all(t["same_output"] for t in turns.values())
    assert turns[1]["metrics"]["stray_tokens"]["a"] > 0
    assert turns[1]["metrics"]["stray_tokens"]["b"] == 0
    assert turns[1]["metrics"]["stray_tokens"]["delta"] == -turns[1]["metrics"][
        "stray_tokens"]["a"]
    diff = _run(capsys, "diff", str(sid), str(doc["session"]), "--db", db, "--json",
                status=1)
    assert diff["divergence"] == doc["divergence"]


def test_bad_rerun_and_diff_input_is_one_line(
    recorded: tuple[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    db, sid = recorded
    # A malformed command line exits 2; a session that is not there, 1.
    cases = [
        (["replay", str(sid), "--db", db, "--rerun", "--set", "nope=1"], 2, "unknown setting"),
        (["replay", str(sid), "--db", db, "--rerun", "--set", "draft_max"], 2, "key=value"),
        (["replay", str(sid), "--db", db, "--rerun", "--set", "draft_max=x"], 2, "integer"),
        (["replay", str(sid), "--db", db, "--rerun", "--set", "draft_max=99"], 2, "at most 64"),
        (["replay", str(sid), "--db", db, "--rerun", "--set", "strategy=bogus"], 2,
         "strategy"),
        (["replay", str(sid), "--db", db, "--set", "strategy=none"], 2, "--rerun"),
        (["replay", str(sid), "--db", db, "--rerun", "--tolerance", "-1"], 2, "tolerance"),
        (["replay", "99", "--db", db, "--rerun"], 1, "no session 99"),
        (["diff", str(sid), "99", "--db", db], 1, "no session 99"),
    ]
    for argv, status, needle in cases:
        assert exit_status(argv) == status, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], (argv, err)
