"""The incidents a CPU cannot reproduce, shown on logs built from the reports' own lines
(tools/report_fixtures.py, which says how; NOT captured runs): #28060's livelock (the
ROCmFPX count, 5362 restores at one position, the server killed inside it) is a
`replay_livelock` and PR 25819's `streak = 2` a `restore_storm`, through `import
llama-server` and `postmortem`, with the restore count and the tokens emitted; the
committed logs are the script's output, byte for byte."""

import gzip
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

from adapters.llama.log.sources import read_log
from specledger.cli.main import main
from tests.adapters.llama.log.test_reader import FIXTURES

REPORTS = FIXTURES / "reports"
SCRIPT = Path(__file__).resolve().parents[3] / "tools" / "report_fixtures.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("report_fixtures", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _postmortem(log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                ) -> tuple[int, dict[str, dict]]:  # type: ignore[type-arg]
    db = str(tmp_path / f"{log.stem}.db")
    capsys.readouterr()
    assert main(["import", "llama-server", str(log), "--db", db, "--json"]) == 0
    [session] = [s["session"] for s in json.loads(capsys.readouterr().out)["sessions"]]
    status = main(["postmortem", str(session), "--db", db, "--json"])
    doc = json.loads(capsys.readouterr().out)
    return status, {f["kind"]: f for f in doc["findings"]}


def _text(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode(errors="surrogateescape")


def test_the_committed_logs_are_the_scripts_output(tmp_path: Path) -> None:
    for path in _script().write(tmp_path):
        assert path.read_bytes() == (REPORTS / path.name).read_bytes(), path.name


@pytest.mark.parametrize("name", ["livelock-28060", "storm-25819"])
def test_every_line_is_a_known_line(name: str) -> None:
    reading = read_log(REPORTS / f"{name}.log.gz")
    assert reading.unknown == 0, reading.unknown_examples


def test_the_28060_livelock_is_named(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    log = REPORTS / "livelock-28060.log.gz"
    text = _text(log)
    restores = text.count("restoring speculative checkpoint")
    emitted = len(re.findall(r"n_gen = \d+, n_remaining = -?\d+, next token", text))
    status, found = _postmortem(log, tmp_path, capsys)
    assert status == 1  # an error: `postmortem` fails the check
    lock = found["replay_livelock"]
    assert lock["severity"] == "error" and lock["turn"] == 1
    n = lock["numbers"]
    assert n["worst_restores"] == n["restores"] == restores == 5362
    # The tokens the task had emitted: the prompt's own and the rounds' before the loop.
    assert n["committed_tokens"] == emitted - 1 > 0
    assert n["worst_position"] == int(re.findall(r"#tokens=(\d+)", text)[-1])
    assert "(restore -> replay: " in n["cycle"] and len(n["cycle"]) < 200
    # The log ends inside the loop, as the report's server did: a request the log cuts.
    assert "partial_request" in found and "run_failed" not in found


def test_the_25819_streak_is_a_storm(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    status, found = _postmortem(REPORTS / "storm-25819.log.gz", tmp_path, capsys)
    storm = found["restore_storm"]
    assert storm["severity"] == "warning" and storm["numbers"]["worst_restores"] == 2
    assert "replay_livelock" not in found and "run_failed" not in found
    assert status == 0  # a storm that ended is a warning
