"""`specledger diff` across backends: sessions of different backends (or `--tokens`) are
compared by their committed tokens, the first differing token named by slot, turn, part,
index, sequence positions, ids and text; exit 1 when they differ. The real pair is a
llama-server run and a torch run of the same conversation (skipped without the binary)."""

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapters.llama.server.paths import require_converter, require_server
from engine.config import RunConfig
from eventlog import Recorder, create_session, get_session, open_db
from eventlog.reader import scan_events
from fsm.event import Event
from fsm.states import Trigger
from specledger.cli.main import main
from specledger.runs.llama import run_llama
from specledger.views.token_text import decoders, session_tokenizer
from tests.adapters.llama.conftest import require_llama

SIM = ["--backend", "sim", "--turns", "2", "--prompt-tokens", "64", "--question-tokens", "8",
       "--answer-tokens", "40"]
# Seed 6's first answer ends with <|im_end|> after 45 tokens, so both engines send the same
# history back (after an answer cut at the limit they do not: llama-server's template closes
# it with <|im_end|>, ours does not). Two engines agree token for token only away from
# near-ties: our target's smallest top-1/top-2 logit gap in this conversation is 2.7e-3,
# above the float32 near-tie bound, 1e-3 (seed 4's was 6.7e-4, a tie another CPU could tip).
REAL = {"turns": 2, "max_answer_tokens": 48, "draft_max": 4, "seed": 6}


def _diff(capsys: pytest.CaptureFixture[str], db: str, *argv: str) -> tuple[int, Any]:
    status = main(["diff", *argv, "--db", db, "--json"])
    return status, json.loads(capsys.readouterr().out)


def copy_session(db: str, sid: int, backend: str | None = None,
                 edit: Callable[[Event], Event] = lambda ev: ev) -> int:
    """A copy of session `sid` (recorded as `backend`), each event passed through `edit`."""
    engine = open_db(db, create=True)
    info = get_session(engine, sid)
    new = create_session(engine, config=info.config, backend=backend or info.backend,
                         seeds=info.seeds, code_version=info.code_version,
                         model_digest=info.model_digest)
    with Recorder(engine, new) as rec:
        for ev in scan_events(engine, sid):
            rec.append(edit(ev))
        rec.end_unit()
    return new


def change_answer_token(db: str, sid: int, turn: int, index: int, token: int) -> tuple[int, int]:
    """A copy of `sid` whose answer in `turn` has `token` at `index`; (copy, old token)."""
    seen = {"n": 0, "old": -1}

    def edit(ev: Event) -> Event:
        block = ev.payload.get("append")
        if ev.turn != turn or ev.trigger not in (Trigger.PREFILL, Trigger.COMMIT) or not block:
            return ev
        start, seen["n"] = seen["n"], seen["n"] + len(block)
        if not start <= index < seen["n"]:
            return ev
        block = list(block)
        seen["old"], block[index - start] = block[index - start], token
        return replace(ev, payload={**ev.payload, "append": block})

    new = copy_session(db, sid, edit=edit)
    return new, seen["old"]


def test_same_backend_keeps_the_event_diff(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    assert main(["run", *SIM, "--db", db]) == 0
    capsys.readouterr()
    status, doc = _diff(capsys, db, "1", "1")
    assert status == 0 and doc["mode"] == "events" and doc["tokens"] is None
    status, doc = _diff(capsys, db, "1", "1", "--tokens")
    assert status == 0 and doc["mode"] == "tokens" and doc["identical"] is True
    assert doc["tokens"]["first"] is None and doc["tokens"]["turns"] == 2
    assert all(t["same_prompt"] and t["same_output"] for t in doc["turns"])


def test_another_backend_is_compared_token_by_token(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    assert main(["run", *SIM, "--db", db]) == 0
    capsys.readouterr()
    same = copy_session(db, 1, backend="llama")
    status, doc = _diff(capsys, db, "1", str(same))
    assert status == 0 and doc["mode"] == "tokens" and doc["divergence"] is None
    assert doc["backends"] == {"a": "sim", "b": "llama"}
    bad, old = change_answer_token(db, same, turn=2, index=7, token=12345)
    status, doc = _diff(capsys, db, "1", str(bad))
    assert status == 1 and doc["identical"] is False
    first = doc["tokens"]["first"]
    assert {k: first[k] for k in ("slot", "turn", "part", "index", "expected", "actual")} == {
        "slot": 0, "turn": 2, "part": "answer", "index": 7, "expected": old, "actual": 12345}
    assert first["expected_text"] is None  # sim ids are not text
    turn2 = next(t for t in doc["turns"] if t["turn"] == 2)
    assert turn2["same_output"] is False and turn2["first_token_diff"] == 7
    main(["diff", "1", str(bad), "--db", db])
    out = capsys.readouterr().out
    assert "first differing token" in out and "turn 2, answer token 7" in out


def test_a_torch_session_reads_with_the_shipped_tokenizer(tmp_path: Path) -> None:
    engine = open_db(str(tmp_path / "t.db"), create=True)
    torch = create_session(engine, config={"model": "shipped:target"}, backend="torch",
                           seeds={}, code_version="x")
    imported = create_session(engine, config={"model": "/x.gguf", "run": None},
                              backend="llama", seeds={}, code_version="x")
    a, b = get_session(engine, torch), get_session(engine, imported)
    assert session_tokenizer(a) is not None and session_tokenizer(b) is None
    da, db = decoders(a, b)
    assert da is not None and db is not None  # the import reads with the other's
    assert da([104, 105, None, 258]) == "hi<|im_end|>"


@pytest.fixture(scope="module")
def real_pair(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A ledger with a llama-server run (1) and a torch run (2) of one conversation."""
    require_llama(require_server)
    require_llama(require_converter)
    db = str(tmp_path_factory.mktemp("cross") / "x.db")
    run_llama(RunConfig(backend="llama", **REAL), db)  # type: ignore[arg-type]
    argv = [f"--{k.replace('_', '-')}={v}" for k, v in REAL.items()]
    assert main(["run", "--backend", "torch", *argv, "--db", db]) == 0
    return db


def test_llama_and_torch_sessions_of_one_conversation_agree(
        real_pair: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    status, doc = _diff(capsys, real_pair, "1", "2")
    assert status == 0 and doc["mode"] == "tokens" and doc["identical"] is True
    assert doc["backends"] == {"a": "llama", "b": "torch"}
    assert doc["tokens"]["unknown"] == {"a": 0, "b": 0}  # the run tokenized its prompts
    assert [(t["same_prompt"], t["same_output"]) for t in doc["turns"]] == [(True, True)] * 2
    gen = [t["metrics"]["generated_tokens"] for t in doc["turns"]]
    assert gen[0]["a"] == gen[0]["b"] == 45 and doc["tokens"]["answer_tokens"] == 45 + 48
    html = Path(real_pair).with_suffix(".html")
    assert main(["report", "1", "2", "--db", real_pair, "--out", str(html)]) == 0
    assert "the committed tokens agree (2 turns, 93 answer tokens)" in html.read_text()


def test_a_llama_session_against_a_changed_torch_answer(
        real_pair: str, capsys: pytest.CaptureFixture[str]) -> None:
    bad, old = change_answer_token(real_pair, 2, turn=2, index=7, token=ord("#"))
    capsys.readouterr()
    status, doc = _diff(capsys, real_pair, "1", str(bad))
    assert status == 1 and doc["identical"] is False
    first = doc["tokens"]["first"]
    prompt = next(t for t in doc["turns"] if t["turn"] == 2)["metrics"]["prompt_tokens"]
    assert (first["slot"], first["turn"], first["part"], first["index"]) == (0, 2, "answer", 7)
    assert (first["position"], first["actual_position"]) == (prompt["a"] + 7, prompt["b"] + 7)
    assert (first["expected"], first["actual"]) == (old, ord("#"))
    assert (first["expected_text"], first["actual_text"]) == (chr(old), "#")
    main(["diff", "1", str(bad), "--db", real_pair])
    out = capsys.readouterr().out
    assert f"turn 2, answer token 7 (sequence position {prompt['a'] + 7} in session 1" in out
