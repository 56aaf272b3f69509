"""A reader that closes the pipe early (`specledger show 1 | head`): every command stops
quietly with status 0 and nothing on stderr, as `git log | head` does, in process and as
a real process whose stdout is a closed pipe (the interpreter's flush at exit included)."""

import io
import subprocess
import sys
from pathlib import Path

import pytest

from specledger.cli.main import main
from specledger.views import output

COMMANDS = (["show", "1"], ["show", "1", "--json"], ["postmortem", "1"], ["sessions"],
            ["replay", "1"], ["diff", "1", "1"], ["--help"])


class _ClosedPipe(io.StringIO):
    """A stdout whose reader has gone: every write and flush fails with EPIPE."""

    def write(self, s: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A ledger with one short sim session."""
    db = str(tmp_path_factory.mktemp("pipe") / "p.db")
    assert main(["run", "--backend", "sim", "--turns", "2", "--answer-tokens", "40",
                 "--db", db, "--json"]) == 0
    return db


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a))
def test_a_closed_stdout_ends_the_command_quietly(argv: list[str], ledger: str,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    monkeypatch.setattr(output.console, "quiet", False)  # a closed pipe silences it after
    assert main([*argv, "--db", ledger] if argv != ["--help"] else argv) == 0
    assert capsys.readouterr().err == ""


def test_a_process_whose_pipe_closed_exits_0_without_a_word(ledger: str) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "specledger", "show", "1", "--db", ledger],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=Path(__file__).resolve().parents[3])
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first write
    err = proc.stderr.read().decode()
    assert proc.wait(120) == 0 and err == ""
