"""An internal invariant failing is a bug report in one line, never the failure's own
words: forced inside `import` and `watch` (the round machine refusing a move, as
`'start_turn' is not allowed in state 'failed'` once reached users), the line says what
kind of failure it was, where in the log it struck when that is known, and where the
traceback went; the exit status is EX_SOFTWARE."""

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from transitions import MachineError

from adapters.llama.ledger.fold import TaskFolder
from adapters.llama.log.reader import parse_log
from adapters.llama.log.records import RecordKind
from fsm.errors import InvalidTransitionError, PayloadError
from fsm.machine import RoundMachine
from specledger.cli import bug_report
from specledger.cli.main import main
from specledger.watch.loop import Watcher, WatchOptions
from tests.specledger.watch.test_stream import FIXTURES, fixture_bytes

INTERNAL = {
    "refused": InvalidTransitionError("'start_turn' is not allowed in state 'failed'"),
    "machine": MachineError('"Can\'t trigger event start_turn from state failed!"'),
    "payload": PayloadError("seq 3 commit: accepted: missing"),
    "assertion": AssertionError("slot 0 in state 'verifying'"),
}
INSIDE_WORDS = ("start_turn", "'failed'", "verifying", "seq 3", "Can't trigger")


@pytest.fixture
def failing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[BaseException]:
    """Every move of the round machine fails with the exception named by the param."""
    exc: BaseException = INTERNAL[request.param]

    def fire(*_args: object, **_kwargs: object) -> None:
        raise exc

    monkeypatch.setattr(RoundMachine, "fire", fire)
    yield exc


def _one_bug_line(err: str) -> str:
    """The line, checked: one, a bug report, none of the failure's own words."""
    assert err.count("\n") == 1, err
    assert "internal error" in err and "bug in specledger" in err
    assert not any(word in err for word in INSIDE_WORDS), err
    return err.strip()


def _traceback_of(line: str) -> str:
    path = Path(line.rsplit("its traceback is in ", 1)[1])
    text = path.read_text()
    path.unlink()
    return text


@pytest.mark.parametrize("failing", list(INTERNAL), indirect=True)
def test_an_import_that_breaks_an_invariant_is_a_bug_report(
        failing: BaseException, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = FIXTURES / "mtp.log.gz"
    assert main(["import", "llama-server", str(log), "--db", str(tmp_path / "l.db")]) == 70
    line = _one_bug_line(capsys.readouterr().err)
    assert line.startswith("specledger import: internal error: ")
    assert bug_report.describe(failing) in line
    saved = _traceback_of(line)
    assert str(failing) in saved and str(log) in saved  # the details, for the report


@pytest.mark.parametrize("failing", ["refused"], indirect=True)
def test_a_watch_that_breaks_an_invariant_says_where_in_the_log(
        failing: BaseException, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "s.log"
    data = fixture_bytes("two-slots")
    log.write_bytes(data)
    first = data[:data.index(b"| task 1 | stop processing")].count(b"\n") + 1
    start = data[:data.index(b"| task 1 | processing task")].count(b"\n") + 1
    # Should the watch not fail, it would run on: SIGTERM ends it after a while.
    timer = threading.Timer(60.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        status = main(["watch", "--llama-log", str(log), "--db", str(tmp_path / "l.db")])
    finally:
        timer.cancel()
    assert status == 70
    line = _one_bug_line(capsys.readouterr().err)
    assert f"(recording task 1 of slot 0, lines {start}-{first} of {log})" in line
    assert str(failing) in _traceback_of(line)


def test_a_failure_inside_a_fold_names_the_line(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def apply(*_args: object) -> None:
        raise AssertionError("slot 0 has no task")

    monkeypatch.setattr(TaskFolder, "apply", apply)
    log, data = tmp_path / "s.log", fixture_bytes("two-slots")
    log.write_bytes(data)
    first = next(r.line for r in parse_log(data.decode()).records
                 if r.kind is not RecordKind.COMPUTE)
    w = Watcher(WatchOptions(log=log, db=str(tmp_path / "l.db"), settle_s=0.0),
                lambda _: None)
    with pytest.raises(AssertionError) as caught:
        w.step()
    assert caught.value.__notes__ == [f"folding line {first} of {log}"]


def test_the_line_without_a_traceback_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """A temp folder that cannot be written to: the line says so by saying no file."""
    monkeypatch.setattr(bug_report, "save_traceback", lambda *_: None)
    line = bug_report.bug_line("show", InvalidTransitionError("'x' in 'y'"), ["show", "1"])
    assert line == ("specledger show: internal error: the round state machine refused an "
                    "event. This is a bug in specledger, not in what you gave it: please "
                    "report it")
