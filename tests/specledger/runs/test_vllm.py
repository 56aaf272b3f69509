"""`specledger run --backend vllm` on vLLM's CPU build (skipped without it, failed under
SPECLEDGER_REQUIRE_VLLM=1): the torch backend's conversation asked of vLLM with MTP,
recorded with vLLM's own counts and no violation; `show`, `postmortem` and `diff --tokens`
against a torch session of the same weights read it; a server that dies mid-run leaves
the turns before it in a failed session; a run that cannot start says why in one line."""

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from adapters.vllm.answers import read_answers
from adapters.vllm.paths import PYTHON_ENV
from engine.config import RunConfig
from eventlog import SessionStatus, get_session, open_db
from eventlog.reader import scan_events
from fsm.states import Trigger
from specledger.cli.main import main
from specledger.runs.observed import RunStoppedError, observe, questions
from specledger.runs.vllm import VllmEngine
from tests.adapters.vllm.conftest import TARGET, require_vllm

SHORT = ["--turns", "2", "--max-answer-tokens", "48", "--draft-max", "4"]


def test_vllm_not_installed_is_one_line_and_records_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(PYTHON_ENV, str(tmp_path / "no-python"))
    db = tmp_path / "v.db"
    assert main(["run", "--backend", "vllm", *SHORT, "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.rstrip().endswith("run make vllm")
    assert not db.exists()


def test_a_method_vllm_lacks_is_a_usage_error(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "v.db"
    assert main(["run", "--backend", "vllm", "--drafter", "ngram-mod", *SHORT, "--db",
                 str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ngram-mod has no vLLM counterpart" in err
    assert not db.exists()


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, Any]:
    status = main([*argv, "--json"])
    return status, json.loads(capsys.readouterr().out)


@pytest.mark.vllm
def test_an_mtp_run_reads_like_any_session(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    require_vllm()
    db = str(tmp_path / "v.db")
    status, run = _json(capsys, ["run", "--backend", "vllm", "--drafter", "mtp", *SHORT,
                                 "--db", db])
    assert status == 0 and run["violations"] == 0 and len(run["turns"]) == 2
    sid = run["session"]
    cfg = get_session(open_db(db, create=False), sid).config
    assert (cfg["engine"], cfg["method"], cfg["prefix_caching"]) == ("vLLM", "mtp", False)
    assert cfg["model"] == TARGET and cfg["provides"]["rounds"]
    # Each turn's rounds are vLLM's verify steps: its own per-request counts. (On a busy
    # machine the server may merge two steps into one chunk; that turn has no rounds.)
    placed = 0
    for turn, answer in zip(run["turns"], read_answers(run["answers"]).answers, strict=True):
        assert answer.spec is not None
        assert (turn["drafted"], turn["accepted"]) == (answer.spec.drafted,
                                                       answer.spec.accepted)
        if turn["rounds"] is not None:
            assert turn["rounds"] == answer.spec.steps
            placed += 1
    assert placed
    status, shown = _json(capsys, ["show", str(sid), "--db", db])
    assert status == 0 and shown["session"]["backend"] == "vllm"
    status, pm = _json(capsys, ["postmortem", str(sid), "--db", db])
    kinds = {f["kind"] for f in pm["findings"]}
    assert "history_reprefill" in kinds and "engine_counter_mismatch" not in kinds
    # The same conversation on our engine, same weights, in bf16 as vLLM runs them.
    assert main(["run", "--backend", "torch", "--model", TARGET, "--dtype",
                 "bfloat16", "--drafter", "mtp", *SHORT, "--db", db]) == 0
    capsys.readouterr()
    status, diff = _json(capsys, ["diff", str(sid + 1), str(sid), "--tokens", "--db", db])
    assert status in (0, 1) and diff["tokens"]["turns"] == 2
    assert diff["tokens"]["unknown"] == {"a": 0, "b": 0}  # vLLM names every id


@pytest.mark.vllm
def test_a_server_that_dies_mid_run_leaves_a_failed_session(tmp_path: Path) -> None:
    require_vllm()
    db = str(tmp_path / "v.db")
    config = RunConfig(backend="vllm", drafter="mtp", turns=3,  # type: ignore[arg-type]
                       max_answer_tokens=24, draft_max=4)
    engine = VllmEngine(config)
    servers = []
    start = engine.server

    def server() -> Any:
        servers.append(start())
        return servers[-1]

    class KillAfterFirstTurn:
        def tokens(self, n: int) -> None:
            pass

        def turn_done(self) -> None:
            os.killpg(servers[-1].pid, signal.SIGKILL)

    engine.server = server  # type: ignore[method-assign]
    with pytest.raises(RunStoppedError) as raised:
        observe(engine, questions(config), db, KillAfterFirstTurn())
    message = str(raised.value)
    assert "\n" not in message and "killed by signal 9" in message
    assert "keeps the 1 turn(s) answered before it, marked failed" in message
    store = open_db(db, create=False)
    info = get_session(store, 1)
    assert info.status is SessionStatus.FAILED
    events = list(scan_events(store, 1))
    assert sum(e.trigger is Trigger.END_TURN for e in events) == 1
    assert events[-1].trigger is Trigger.FAIL and events[-1].turn == 2


@pytest.mark.vllm
def test_a_model_vllm_refuses_is_one_line(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    require_vllm()
    db = tmp_path / "v.db"
    assert main(["run", "--backend", "vllm", "--model", "shipped:target", "--drafter", "none",
                 "--turns", "1", "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Unexpected head dim size, 32" in err
