"""`specledger run --backend llama` on the real llama-server (skipped without the binary,
failed under SPECLEDGER_REQUIRE_LLAMA=1): the torch backend's conversation, streamed or
not, recorded from the server's log and answers with no violation, the same session as
importing those files, and the run's provenance."""

import json
from pathlib import Path

import pytest

from adapters.llama.ledger.provenance import file_sha256
from adapters.llama.log.sources import read_log
from adapters.llama.server.paths import require_converter, require_server
from engine.config import RunConfig
from engine.errors import ConfigError
from eventlog import get_session, open_db
from eventlog.postmortem import Kind, postmortem_session
from eventlog.reader import scan_events
from fsm.states import Trigger
from specledger.cli.main import main
from specledger.runs.llama import questions, run_llama
from tests.adapters.llama.conftest import require_llama


def config(**changes: object) -> RunConfig:
    """A short llama run."""
    return RunConfig(backend="llama", turns=2, max_answer_tokens=24, draft_max=4,
                     **changes)  # type: ignore[arg-type]


def test_questions_are_the_torch_sessions() -> None:
    from engine.training.conversations import conversation_prompts

    asked = questions(config(seed=3))
    expected = conversation_prompts(3 * 1009, 2)
    assert [q.encode() for q in asked] == [bytes(q) for q in expected]


def test_a_chain_llama_server_would_reorder_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "c.db"
    assert main(["run", "--backend", "llama", "--drafter", "mtp,ngram-mod", "--turns", "1",
                 "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.rstrip().endswith("pass --drafter ngram-mod,mtp")
    assert not db.exists()  # refused before anything ran or was recorded


def test_one_slot_only() -> None:
    from specledger.runs.llama import server_options

    with pytest.raises(ConfigError, match="one conversation"):
        server_options(config(slots=2))


def test_gguf_files_are_served_as_given(tmp_path: Path) -> None:
    """`--model FILE.gguf --draft-model FILE.gguf` serves those files: no export, no cache."""
    from specledger.runs.llama import server_options

    target, draft = tmp_path / "target.gguf", tmp_path / "draft.gguf"
    for path in (target, draft):
        path.write_bytes(b"GGUF" + bytes(60))
    opts = server_options(config(model=str(target), draft_model=str(draft),
                                 drafter="draft-model"))
    assert (opts.model, opts.draft_model) == (target, draft)


@pytest.mark.parametrize("drafter,stream", [("mtp", True), ("ngram-mod", False)])
def test_run_records_the_servers_log(tmp_path: Path, drafter: str, stream: bool) -> None:
    require_llama(require_server)
    require_llama(require_converter)
    db = str(tmp_path / "r.db")
    done = run_llama(config(drafter=drafter, stream=stream), db)
    s = done.session
    assert s.ledger.violations == 0 and len(s.ledger.turns) == 2
    assert s.ledger.responses_matched == 2
    assert read_log(done.log_path).unknown == 0
    engine = open_db(db, create=False)
    cfg = get_session(engine, s.session_id).config
    flags = cfg["flags"]
    assert flags[flags.index("-np") + 1] == "1" and "-v" in flags
    assert cfg["run"]["stream"] is stream and cfg["provides"]["prompt_ids"] is True
    assert cfg["model_sha256"] == file_sha256(cfg["model"]) and "version" in cfg["version"]
    events = list(scan_events(engine, s.session_id))
    starts = [e.payload for e in events if e.trigger is Trigger.START_TURN]
    assert all(None not in p["append"] for p in starts)  # the server's own tokenization
    # The server sampled as the session says: the request left none of its defaults.
    assert all(p["sampler"]["min_p"] == 0.0 and p["sampler"]["others"] == [] for p in starts)
    kinds = [f.kind for f in postmortem_session(engine, s.session_id).findings]
    assert Kind.SAMPLER_MISMATCH not in kinds and Kind.CHECK_SKIPPED in kinds
    answers = json.loads(done.responses_path.read_text())
    assert [a["timings"]["predicted_n"] for a in answers] == [
        t.generated_tokens for t in s.ledger.turns]
    # Importing the same files records the same rounds (the prompt ids aside).
    assert main(["import", "llama-server", str(done.log_path), "--responses",
                 str(done.responses_path), "--db", db]) == 0
    again = list(scan_events(engine, s.session_id + 1))
    assert [(e.trigger, e.slot, e.turn, e.round) for e in again] == [
        (e.trigger, e.slot, e.turn, e.round) for e in events]
    commits = [e.payload["append"] for e in events if e.trigger is Trigger.COMMIT]
    assert commits == [e.payload["append"] for e in again if e.trigger is Trigger.COMMIT]


def test_rerun_runs_llama_server_again_and_compares(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    require_llama(require_server)
    require_llama(require_converter)
    db = str(tmp_path / "r.db")
    sid = run_llama(config(drafter="ngram-mod"), db).session.session_id
    capsys.readouterr()
    assert main(["replay", str(sid), "--rerun", "--db", db, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["reproduced"] and doc["mode"] == "reexecution" and doc["compared"] > 50
    assert get_session(open_db(db, create=False), doc["session"]).parent_id == sid
    # A counterfactual reruns with the change and compares turn by turn.
    assert main(["replay", str(sid), "--rerun", "--set", "draft_max=2", "--db", db,
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "counterfactual" and doc["set"] == {"draft_max": 2}
    assert [t["same_output"] for t in doc["turns"]] == [True, True]


def test_an_imported_log_has_no_run_to_repeat(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "i.db")
    fixtures = Path(__file__).resolve().parents[2] / "adapters" / "llama" / "fixtures"
    assert main(["import", "llama-server", str(fixtures / "ngram-mod.log.gz"), "--db", db,
                 "--json"]) == 0
    capsys.readouterr()
    assert main(["replay", "1", "--rerun", "--db", db]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "imported from a llama-server log" in err[0]
