"""`specledger watch` as a user runs it: findings printed as they come, Prometheus
counters served, SIGTERM and Ctrl-C end it cleanly (the request in flight recorded as
incomplete), and the next run resumes where it stopped."""

import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.exc import SQLAlchemyError

from adapters.process import free_port
from fsm.errors import SpecledgerError
from specledger.cli import main
from tests.specledger.watch.helpers import rows, watched
from tests.specledger.watch.intervals.test_loop import corpus
from tests.specledger.watch.test_prune import age
from tests.specledger.watch.test_stream import fixture_bytes

ROOT = Path(__file__).parents[3]


_STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_watch_left() -> Iterator[None]:
    """Kill any watch a failed test left running."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _start(log: Path, db: Path, *extra: str, flag: str = "--llama-log"
           ) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "80"}  # a line never wraps
    proc = subprocess.Popen([sys.executable, "-m", "specledger", "watch", flag,
                             str(log), "--db", str(db), *extra], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _STARTED.append(proc)
    return proc


def _line(proc: subprocess.Popen[str], want: str, timeout_s: float = 60.0) -> str:
    """The first line of the watch's stdout that holds `want`, read from the pipe a byte
    at a time: a buffered readline takes in every line written at once, and select then
    sees none of those it has not returned (the watch prints its first two at once)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    end = time.monotonic() + timeout_s
    line = b""
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        byte = os.read(fd, 1)
        if not byte:  # the watch ended
            break
        line += byte
        if byte == b"\n":
            text, line = line.decode(), b""
            if want in text:
                return text
    proc.kill()
    err = proc.stderr.read() if proc.stderr else ""
    raise AssertionError(f"no line with {want!r}; stderr: {err}")


def _wait_rows(db: Path, n: int, timeout_s: float = 60.0) -> None:
    """Wait until the watch has recorded `n` requests (the ledger may not exist yet)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            if len(rows(str(db))) >= n:
                return
        except (SpecledgerError, SQLAlchemyError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} requests recorded in {timeout_s} s")


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_findings_metrics_and_a_clean_stop(tmp_path: Path, how: signal.Signals) -> None:
    log, db, port = tmp_path / "s.log", tmp_path / "l.db", free_port()
    log.touch()
    proc = _start(log, db, "--metrics-port", str(port))
    _line(proc, "watching")
    log.write_bytes(fixture_bytes("edited-history"))
    found = _line(proc, "history_reprefill")
    assert "slot 0 turn 2" in found and "reprefill_tokens=22" in found
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        scrape = r.read().decode()
    assert 'specledger_watch_requests_total{status="finished"} 2.0' in scrape
    assert 'specledger_watch_findings_total{kind="history_reprefill",severity="warning"} 1.0' \
        in scrape
    assert "specledger_watch_reprefilled_tokens_total 22.0" in scrape
    proc.send_signal(how)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "stopped: 2 request(s) recorded (0 incomplete)" in out
    assert len(rows(str(db))) == 2


def test_a_stop_mid_request_and_the_resume(tmp_path: Path) -> None:
    log, db = tmp_path / "s.log", tmp_path / "l.db"
    data = fixture_bytes("two-slots")
    middle = data.index(b"\n", data.index(b"| task 9 | processing task") + 200) + 1
    log.write_bytes(data[:middle])
    proc = _start(log, db, "--json")
    _wait_rows(db, 2)  # tasks 0 and 1; task 9 stays in flight
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    summary = json.loads(out.splitlines()[-1])["summary"]
    assert (summary["recorded"], summary["incomplete"]) == (3, 1)
    with log.open("ab") as f:
        f.write(data[middle:])
    proc = _start(log, db, "--json")
    _wait_rows(db, 4)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    summary = json.loads(out.splitlines()[-1])["summary"]
    assert proc.returncode == 0, err
    assert (summary["recorded"], summary["resumed_at"]) == (1, middle)
    assert sorted((task, status) for _, status, _, task, _ in rows(str(db))) == [
        (0, "finished"), (1, "finished"), (9, "failed"), (10, "finished")]


def test_keep_for_prunes_the_sessions_older_than_it(tmp_path: Path) -> None:
    log, db = tmp_path / "s.log", tmp_path / "l.db"
    watched(log, str(db), "two-slots")
    age(str(db), [sid for sid, *_ in rows(str(db))][:3])  # noted two days ago
    proc = _start(log, db, "--json", "--keep-for", "1d")
    with log.open("ab") as f:
        f.write(fixture_bytes("mtp"))  # the server restarted, appending
    last = max(sid for sid, *_ in rows(str(db)))
    end = time.monotonic() + 60
    while sum(sid > last for sid, *_ in rows(str(db))) < 2:
        assert time.monotonic() < end, "the new server's two requests were not recorded"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    summary = json.loads(out.splitlines()[-1])["summary"]
    assert (summary["recorded"], summary["pruned"]) == (2, 3)
    assert [task for *_, task, _ in rows(str(db))] == [10, 0, 11]


def test_a_file_gone_while_no_watch_ran_is_said(tmp_path: Path) -> None:
    log, db = tmp_path / "s.log", tmp_path / "l.db"
    watched(log, str(db), "two-slots")
    (tmp_path / "new.log").write_bytes(fixture_bytes("mtp"))
    os.replace(tmp_path / "new.log", log)  # the file the watch stopped in is deleted
    proc = _start(log, db)
    said = _line(proc, "lost")
    assert said.startswith(f"{log}: lost an unknown number of bytes from byte ")
    assert "is no longer at the path nor beside it" in said
    _wait_rows(db, 6)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "2 request(s) recorded" in out and "1 stretch(es) not read (0 byte(s) known)" in out


def test_a_bad_duration_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch", "--llama-log", str(tmp_path / "s.log"), "--db",
                 str(tmp_path / "l.db"), "--keep-for", "soon"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--keep-for 'soon'" in err


def test_a_vllm_log_crash_is_printed_and_its_run_recorded(tmp_path: Path) -> None:
    log, db = tmp_path / "s.log", tmp_path / "l.db"
    log.touch()
    proc = _start(log, db, flag="--vllm-log")
    _line(proc, "watching")
    log.write_bytes((corpus("vllm") / "vllm-project-vllm-40756-qwen36-27b-mtp5-tp4-ima-"
                     "crash.log").read_bytes())
    found = _line(proc, "server_crash")
    assert "vllm run 1 (pid 1, session 1, log line 11) error server_crash" in found
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "stopped: 1 server run(s) recorded (0 incomplete)" in out


def test_the_ring_with_an_interval_log_is_one_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch", "--sglang-log", str(tmp_path / "s.log"), "--db",
                 str(tmp_path / "l.db"), "--ring", "8"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--sglang-log takes neither" in err
