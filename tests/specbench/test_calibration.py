"""The calibration suite: a run writes its profile into its own folder (where `--profile
PATH` finds it), over the shipped one only when recorded, validates against recorded torch
runs and reports no goal."""

import json
from pathlib import Path

import pytest

from engine.sim.costs import PROFILE_DIR, get_profile
from eventlog import get_session, open_db
from specbench import BenchOptions, calibration, run_suite
from specbench.calibration import PROFILE_NAME
from specbench.calibration.fit import FITTED
from specbench.calibration.measure import QUICK
from specledger.cli.main import main


def test_quick_run_writes_its_profile_but_not_the_shipped_one(tmp_path: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in PROFILE_DIR.glob("*")} \
        if PROFILE_DIR.is_dir() else {}
    opts = BenchOptions(out=tmp_path, db=str(tmp_path / "bench.db"), quick=True)
    result = run_suite("calibration", opts)
    after = {p.name: p.stat().st_mtime_ns for p in PROFILE_DIR.glob("*")} \
        if PROFILE_DIR.is_dir() else {}
    assert after == before

    folder = tmp_path / "calibration"
    profile = get_profile(PROFILE_NAME, folder)
    assert get_profile(str(folder / f"{PROFILE_NAME}.json")) == profile  # --profile PATH
    stored = json.loads((folder / f"{PROFILE_NAME}.json").read_text())
    assert stored["calibration"]["quick"] is True
    assert stored["calibration"]["machine"]["device"] == "cpu"
    assert set(stored["calibration"]["fit_error"]) >= {"verify_live", "prefill", "restore"}
    for name in FITTED:
        assert getattr(profile, name) > 0
    assert profile.state_bytes > 0 and profile.kv_bytes_per_token > 0
    for path in ("results.json", "results.md", "forward_fit.png", "forward_fit.svg"):
        assert (folder / path).is_file(), path

    doc = json.loads((folder / "results.json").read_text())
    validation = doc["calibration"]["validation"]
    assert [v["drafter"] for v in validation] == ["none", "mtp"]
    for v in validation:  # a torch run after each kept pass, replayed round by round
        assert len(v["sessions"]) == 2
        assert v["sim"]["rounds"] == v["torch"]["rounds"]
        assert v["sim"]["generated"] == v["torch"]["generated"]
    # No goal: the goals table has no calibration line; the errors are in the table.
    assert result.goals == [] and doc["goals"] == []
    assert "validation error" in (folder / "results.md").read_text()
    engine = open_db(opts.db, create=False)
    backends = [get_session(engine, sid).backend for sid in result.sessions]
    assert backends == ["torch"] * 4
    engine.dispose()


@pytest.mark.parametrize("record", [False, True])
def test_only_a_recorded_run_stores_the_shipped_profile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        record: bool) -> None:
    shipped = tmp_path / "shipped"
    monkeypatch.setattr(calibration, "FULL", QUICK)  # a full run's path at the quick sizes
    monkeypatch.setattr(calibration, "PROFILE_DIR", shipped)
    opts = BenchOptions(out=tmp_path / "out", db=str(tmp_path / "bench.db"), record=record)
    result = run_suite("calibration", opts)
    stored = shipped / f"{PROFILE_NAME}.json"
    assert stored.is_file() == record and (stored in result.files) == record
    fitted = tmp_path / "out" / "calibration" / f"{PROFILE_NAME}.json"
    assert fitted in result.files
    assert main(["run", "--backend", "sim", "--profile", str(fitted), "--turns", "1",
                 "--prompt-tokens", "64", "--question-tokens", "8", "--answer-tokens", "40",
                 "--db", str(tmp_path / "sim.db"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
