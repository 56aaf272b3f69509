"""`specledger bench`: suites run from the CLI, write their files and the goals table,
record their runs in the benchmark's log, and refuse bad input in one line."""

import json
from pathlib import Path

import pytest

from eventlog import list_sessions, open_db
from specbench import SUITES
from specledger.cli import build_parser, main


def test_bench_runs_a_suite_and_keeps_the_goals(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    assert main(["bench", "conversation", "--quick", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    suite = doc["suites"]["conversation"]
    assert doc["db"] == str(out / "bench.db")
    for f in suite["files"]:
        assert Path(f).stat().st_size > 0
    assert {Path(f).suffix for f in suite["files"]} >= {".json", ".md", ".png", ".svg"}
    stored = {s.id for s in list_sessions(open_db(doc["db"], create=False))}
    assert set(suite["sessions"]) <= stored and suite["sessions"]
    names = {g["name"] for g in doc["goals"]}
    assert "zero re-prefill of history under truncate" in names
    goals_md = (out / "goals.md").read_text()
    assert all(name in goals_md for name in names)


def test_bench_rejects_an_unknown_suite_before_running_any(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "conversation", "nonsense", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"specledger: error: bench: unknown suite 'nonsense' (known: "
                   f"{', '.join(SUITES)})"]
    assert not (tmp_path / "conversation").exists()


def test_bench_without_suites_means_all() -> None:
    args = build_parser().parse_args(["bench"])
    assert args.suites == [] and args.db is None


def test_bench_rejects_zero_threads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "conversation", "--threads", "0", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["specledger: error: threads: 0 must be at least 1"]
