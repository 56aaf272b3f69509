"""`specledger postmortem` and `specledger scenario`: the JSON contract, the exit status
that gates CI, the reference run, and every sim scenario reproduced and fixed."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from eventlog import open_db
from eventlog.schema import sessions
from specledger.cli.main import main

SMALL = ["--backend", "sim", "--turns", "2", "--prompt-tokens", "64",
         "--question-tokens", "8", "--answer-tokens", "40"]


def _doc(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> dict:
    assert main(list(argv)) == status, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def db(db_url: str) -> str:
    """A fresh ledger, on SQLite and on PostgreSQL."""
    return db_url


def test_postmortem_json_and_exit_status(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _doc(capsys, "run", "--db", db, "--json", "--eog-policy", "legacy", *SMALL)["session"]
    good = _doc(capsys, "run", "--db", db, "--json", *SMALL)["session"]
    doc = _doc(capsys, "postmortem", str(bad), "--db", db, "--json", status=1)
    assert set(doc) == {"session", "status", "events", "config", "reference", "counts",
                        "findings"}
    (f,) = doc["findings"]
    assert set(f) == {"kind", "severity", "seq", "slot", "turn", "round", "numbers",
                      "explanation", "fix"}
    assert (f["kind"], f["severity"], doc["counts"]["error"]) == ("eog_stray_tokens", "error", 1)
    assert f["seq"][0] <= f["seq"][1] <= doc["events"]
    clean = _doc(capsys, "postmortem", str(good), "--db", db, "--json")
    assert clean["findings"] == [] and clean["counts"] == {"error": 0, "warning": 0, "info": 0}
    assert main(["postmortem", str(bad), "--db", db]) == 1
    assert "eog_stray_tokens" in capsys.readouterr().out


def test_warnings_gate_only_when_asked(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    sid = _doc(capsys, "run", "--db", db, "--json", "--acceptance", "0.05", *SMALL)["session"]
    doc = _doc(capsys, "postmortem", str(sid), "--db", db, "--json")
    assert [f["kind"] for f in doc["findings"]] == ["acceptance_collapse"]
    _doc(capsys, "postmortem", str(sid), "--db", db, "--json", "--fail-on", "warning",
         status=1)


def test_parent_plain_run_is_the_reference(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    plain = _doc(capsys, "run", "--db", db, "--json", "--drafter", "none", *SMALL)["session"]
    spec = _doc(capsys, "replay", str(plain), "--db", db, "--rerun", "--json", "--set",
                "drafter=synthetic", "--set", "strategy=none")["session"]
    doc = _doc(capsys, "postmortem", str(spec), "--db", db, "--json", status=1)
    assert doc["reference"] == plain
    kinds = {f["kind"] for f in doc["findings"]}
    assert kinds == {"state_contamination", "output_mismatch"}
    other = _doc(capsys, "run", "--db", db, "--json", "--seed", "5", "--drafter", "none",
                 *SMALL)["session"]
    assert main(["postmortem", str(spec), "--db", db, "--reference", str(other)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed=5 vs 0" in err[0]
    assert main(["postmortem", str(spec), "--db", db, "--reference", str(spec)]) == 1
    assert "drafter is 'synthetic'" in capsys.readouterr().err


def test_incomplete_log_is_noted(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    sid = _doc(capsys, "run", "--db", db, "--json", *SMALL)["session"]
    with open_db(db, create=True).begin() as conn:
        conn.execute(update(sessions).where(sessions.c.id == sid).values(
            status="running", writer_host="elsewhere",
            heartbeat=datetime.now(UTC) - timedelta(hours=1)))
    doc = _doc(capsys, "postmortem", str(sid), "--db", db, "--json")
    assert doc["status"] == "incomplete"
    assert [(f["kind"], f["severity"]) for f in doc["findings"]] == [("incomplete_log",
                                                                      "warning")]


@pytest.mark.parametrize(("name", "kind"), [
    ("eog-tail", "eog_stray_tokens"),
    ("replay-livelock", "replay_livelock"),
    ("no-rollback", "state_contamination"),
])
def test_sim_scenarios_reproduce_and_fix(db: str, name: str, kind: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(capsys, "scenario", name, "--db", db, "--json")
    assert doc["reproduced"] is True and doc["fixed"] is True
    assert kind in [f["kind"] for f in doc["postmortem"]["findings"]]
    assert doc["postmortem"]["counts"]["error"] >= 1
    cf = doc["counterfactual"]
    assert cf["postmortem"]["counts"]["error"] == 0
    assert cf["set"] and cf["branch"] is not None
    assert main(["postmortem", str(doc["session"]), "--db", db, "--json"]) == 1
    assert main(["postmortem", str(cf["session"]), "--db", db, "--json"]) == 0
    capsys.readouterr()


def test_draft_checkpoint_scenario_is_torch_only(db: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenario", "draft-ckpt-discard", "--db", db]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--backend torch" in err[0]
    assert main(["scenario", "eog-tail", "--db", db, "--backend", "torch", "--model",
                 str(tmp_path / "nothing")]) == 1
    assert "checkpoint directory" in capsys.readouterr().err
