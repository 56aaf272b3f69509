"""Importing an interval engine's logs (specledger/runs/interval_import.py, through `import
vllm`): each server run that shows anything is a session, a folder's file that is no log is
said, not fatal; the CLI says bad input in one line."""

import json
import shutil
from pathlib import Path

import pytest

from adapters.vllm.log.reader import read_source, shipped
from eventlog import get_session, open_db
from specledger.cli.main import main
from specledger.runs.interval_import import import_paths
from tests.adapters.vllm.log.test_reader import FIXTURES, TWO, _lines


def test_a_folder_imports_its_logs_and_says_what_is_no_log(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(FIXTURES / "default.log.gz", folder / "server.log.gz")
    (folder / "two.log").write_bytes(TWO)
    (folder / "notes.txt").write_text("what I did\n")
    db = f"sqlite:///{tmp_path / 'l.db'}"
    done = {Path(d.name).name: d for d in import_paths(db, [folder], read_source)}
    assert "not a vLLM log" in (done["notes.txt"].error or "")
    assert len(done["server.log.gz"].sessions) == 1
    plain, speculative = done["two.log"].sessions
    cfg = get_session(open_db(db, create=False), speculative).config
    # The run without speculation is the other's baseline (vllm#39680's A/B in one file).
    assert cfg["source"]["peers"] == [{"run": 1, "pid": 1422509, "generation_tps": [342.2]}]
    assert get_session(open_db(db, create=False), plain).config["source"]["peers"] == []


def test_import_vllm_on_the_command_line(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "l.db")
    assert main(["import", "vllm", "shipped:cpu-mtp-2026-12-07", "--db", db, "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["sessions"]
    assert (doc["intervals"], doc["requests"], doc["drafter"], doc["draft_max"]) == (
        3, 3, "mtp", 2)
    assert main(["show", str(doc["session"]), "--db", db]) == 0
    shown = capsys.readouterr().out
    assert "vllm 0.32.0 log" in shown and "3 intervals" in shown


@pytest.mark.parametrize(("argv", "said"), [
    (["import", "vllm", "{notes}"], "not a vLLM log"),
    (["import", "vllm", "shipped:nothing"], "no shipped log 'shipped:nothing'"),
    (["import", "vllm", "{log}", "--responses", "{notes}"], "--responses and --model go "
                                                            "with llama-server logs"),
])
def test_bad_input_is_one_line(argv: list[str], said: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    args = [a.format(notes=notes, log=shipped("cpu-mtp-2026-12-07")) for a in argv]
    assert main([*args, "--db", str(tmp_path / "l.db")]) != 0
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


def test_report_draws_the_series(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "l.db")
    assert main(["import", "vllm", str(FIXTURES / "debug.log.gz"), "--db", db]) == 0
    out = tmp_path / "r.html"
    assert main(["report", "1", "--db", db, "--out", str(out)]) == 0
    html = out.read_text()
    assert "Interval series" in html and "acceptance at each draft position" in html
    assert html.count("<svg") >= 4


def test_a_rotated_set_is_one_stream(tmp_path: Path) -> None:
    import gzip

    lines = _lines(gzip.decompress((FIXTURES / "default.log.gz").read_bytes()))
    half = len(lines) // 2
    (tmp_path / "server.log.1.gz").write_bytes(gzip.compress(b"".join(lines[:half])))
    (tmp_path / "server.log").write_bytes(b"".join(lines[half:]))
    db = f"sqlite:///{tmp_path / 'l.db'}"
    (done,) = import_paths(db, [tmp_path / "server.log.1.gz", tmp_path / "server.log"],
                           read_source)
    assert done.lines == len(lines) and len(done.sessions) == 1
    assert done.runs[0].summary["intervals"] == 3


def test_import_sglang_then_every_reading_command(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The README's SGLang example: its session shows, postmortems (exit 1: the scheduler
    crashed), exports and reports like a vLLM one."""
    db = str(tmp_path / "l.db")
    assert main(["import", "sglang", "shipped:mtp-mamba-crash-27325", "--db", db,
                 "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["sessions"]
    assert (doc["engine"], doc["intervals"], doc["requests"]) == ("sglang", 3, 0)
    assert [f["kind"] for f in doc["failures"]] == ["scheduler_crash"]
    assert main(["show", "1", "--db", db]) == 0
    shown = capsys.readouterr().out
    assert "3 intervals" in shown and "failure scheduler_crash at log line 5" in shown
    assert main(["postmortem", "1", "--db", db]) == 1
    assert "The scheduler crashed at log line 5" in " ".join(capsys.readouterr().out.split())
    out = tmp_path / "s.parquet"
    assert main(["export", "1", "--format", "parquet", "--out", str(out), "--db", db]) == 0
    assert main(["report", "1", "--db", db, "--out", str(tmp_path / "r.html")]) == 0
    assert out.stat().st_size and "Interval series" in (tmp_path / "r.html").read_text()


@pytest.mark.parametrize(("argv", "said"), [
    (["import", "sglang", "{notes}"], "is not an SGLang log"),
    (["import", "sglang", "shipped:nothing"], "no shipped log 'shipped:nothing'"),
])
def test_bad_sglang_input_is_one_line(argv: list[str], said: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    assert main([*(a.format(notes=notes) for a in argv), "--db", str(tmp_path / "l.db")]) != 0
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
