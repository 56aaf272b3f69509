"""`specledger bench`: suites run from the CLI, write their files and the goals table,
record their runs in the benchmark's log, write the tracked results only under --record,
and refuse bad input in one line."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.sim.costs import PROFILE_DIR
from eventlog import list_sessions, open_db
from specbench import SUITES
from specbench.record import DEFAULT_OUT, recorded_results
from specledger.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[3]


def _specledger() -> list[str]:
    script = Path(sys.executable).parent / "specledger"
    return [str(script)] if script.exists() else [sys.executable, "-m", "specledger"]


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


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder`: its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_bench_without_out_writes_the_ignored_default_not_the_tracked_results(
        tmp_path: Path) -> None:
    tracked = [ROOT / "bench" / "results", PROFILE_DIR]
    before = [_tree(folder) for folder in tracked]
    r = subprocess.run([*_specledger(), "bench", "recorder", "--quick"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    out = tmp_path / DEFAULT_OUT
    assert (out / "recorder" / "results.json").stat().st_size > 0
    assert (out / "goals.md").is_file() and (out / "bench.db").is_file()
    assert [_tree(folder) for folder in tracked] == before


def test_bench_record_outside_a_checkout_is_one_line(tmp_path: Path) -> None:
    """specbench installed on its own (as from a wheel): no tracked results to record."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "specbench", site / "specbench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    run = f"import sys; sys.path.insert(0, {str(site)!r}); from specledger.cli.main import main; " \
          "sys.exit(main(sys.argv[1:]))"
    r = subprocess.run([sys.executable, "-c", run, "bench", "recorder", "--record"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(err) == 1, r.stderr
    assert f"{site} is not a specledger checkout" in err[0], err
    assert not (tmp_path / "out").exists()


def test_bench_record_is_for_full_runs_and_takes_no_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert recorded_results() == ROOT / "bench" / "results"  # this checkout's
    assert main(["bench", "recorder", "--record", "--quick"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["specledger: error: bench: --record keeps full runs' numbers; --quick's "
                   "are not to quote (drop one)"]
    with pytest.raises(SystemExit) as exc:
        main(["bench", "recorder", "--record", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
