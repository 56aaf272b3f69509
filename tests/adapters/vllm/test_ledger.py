"""vLLM's answers recorded through the round machine, from real captures (vLLM 0.32's CPU
build): MTP k=4 on the wide model (3 turns of up to 512 tokens; the third runs into the
context limit, where vLLM drafts fewer and then none) and ngram k=8 on a random-weight
model. No vLLM is needed: these read what a run wrote."""

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from adapters.protocol import Recording
from adapters.vllm.answers import parse_answers
from adapters.vllm.provenance import Provenance
from engine.config import RunConfig
from engine.session import MemoryJournal
from eventlog import open_db
from eventlog.postmortem import Kind, postmortem_session
from eventlog.projection import project
from fsm.payload_schema import check_events
from fsm.states import Trigger
from specledger.runs.observed import UnitJournal, store_journal
from specledger.runs.vllm import VllmEngine, VllmReport

FIXTURES = Path(__file__).parent / "fixtures"


def records(name: str) -> list[dict[str, Any]]:
    """A run's exchange records."""
    doc: list[dict[str, Any]] = json.loads(
        gzip.decompress((FIXTURES / f"{name}.answers.json.gz").read_bytes()))
    return doc


def record(recs: list[dict[str, Any]], drafter: str, k: int, journal: Any,
           error: str | None = None) -> Recording:
    """`recs` recorded as `run --backend vllm` records them (the model directory only
    names the session's model; nothing is loaded)."""
    config = RunConfig(backend="vllm", model="shipped:target", drafter=drafter, draft_max=k,
                       turns=len(recs))  # type: ignore[arg-type]
    engine = VllmEngine(config)
    text = json.dumps(recs)
    prov = Provenance(("--model", "m"), "server.log", "answers.json", "0.32.0", config.model,
                      None, config.to_dict())
    return engine.record(VllmReport(parse_answers(text), recs, prov, error), journal)


def test_mtp_rounds_are_vllms_steps() -> None:
    recs = records("mtp-wide")
    journal = MemoryJournal()
    rec = record(recs, "mtp", 4, journal)
    assert rec.violations == 0 and check_events(journal.events) == []
    answers = parse_answers(json.dumps(recs)).answers
    # Every verify step is a round: drafted and accepted as vLLM counted them.
    for turn, a in zip(rec.turns[:2], answers, strict=False):
        assert a.spec is not None
        assert (turn.rounds, turn.drafted, turn.accepted) == (a.spec.steps, a.spec.drafted,
                                                              a.spec.accepted)
    # The third turn ran into the context limit: vLLM drafted fewer, then nothing, and a
    # step that accepted none looks like one that drafted none. Its rounds are unknown.
    assert rec.config["provides"]["rounds"] == "where the stream places them (2 of 3 turns)"
    assert rec.turns[2].rounds is None and rec.turns[2].drafted == answers[2].spec.drafted
    # The slot holds the conversation as vLLM tokenized and answered it: the third turn's
    # prompt extends the second turn's rounds, and its own answer is named where its
    # rounds are not.
    second, last = answers[1], answers[2]
    ends = [e for e in journal.events if e.trigger is Trigger.END_TURN]
    after_second = project(journal.events, at=ends[1].seq)[0].tokens
    assert after_second == [*second.prompt_ids, *second.tokens] == last.prompt_ids[:1581]
    assert project(journal.events)[0].tokens == [*last.prompt_ids, last.tokens[0]]
    metrics = ends[2].payload["metrics"]
    assert metrics["answer_ids"] == last.tokens and "rounds" in metrics["unknown"]


def test_without_a_prefix_cache_every_turn_prefills_the_history_again() -> None:
    journal = MemoryJournal()
    rec = record(records("mtp-wide"), "mtp", 4, journal)
    restores = [e.payload for e in journal.events if e.trigger is Trigger.CTX_RESTORE]
    starts = [e.payload for e in journal.events if e.trigger is Trigger.START_TURN]
    # Turn 2's prompt extends turn 1's whole slot (419 prompt + 512 answer tokens): all of
    # it is kept as tokens, and all of it prefilled again from an empty state.
    assert starts[1]["kept"] == 931 and starts[1]["f_keep"] == 1.0
    assert restores[0] == {"position": 0, "from_position": 930, "reset": True,
                           "reprefill": 931}
    assert rec.config["prefix_caching"] is False
    assert rec.config["reprefill"]["reprefill_tokens"] == 931 + 1581


def test_a_counter_that_disagrees_is_a_finding(tmp_path: Path) -> None:
    recs = copy.deepcopy(records("ngram-random"))
    recs[1]["counters"]["after"]["accepted"] += 1  # Prometheus counted one more acceptance
    journal = UnitJournal()
    rec = record(recs, "ngram-simple", 8, journal)
    assert rec.violations == 3  # the per-position sum, the draft total, the answer's own
    db = str(tmp_path / "v.db")
    sid = store_journal(db, journal, rec)
    findings = postmortem_session(open_db(db, create=False), sid).findings
    mismatch = next(f for f in findings if f.kind is Kind.ENGINE_COUNTER_MISMATCH)
    assert mismatch.turn == 2 and "prometheus" in mismatch.explanation
    reprefill = next(f for f in findings if f.kind is Kind.HISTORY_REPREFILL)
    assert "kept no prefix" in reprefill.explanation and "--drafter none" in reprefill.fix


def test_a_run_that_stopped_early_ends_failed_after_its_turns(tmp_path: Path) -> None:
    journal = UnitJournal()
    rec = record(records("ngram-random")[:1], "ngram-simple", 8, journal,
                 error="vLLM's server (pid 1) killed by signal 9 mid-run")
    assert rec.error is not None and len(rec.turns) == 1
    assert journal.events[-1].trigger is Trigger.FAIL and journal.events[-1].turn == 2
    db = str(tmp_path / "v.db")
    sid = store_journal(db, journal, rec)
    kinds = [f.kind for f in postmortem_session(open_db(db, create=False), sid).findings]
    assert Kind.RUN_FAILED in kinds


def test_what_arrived_of_an_interrupted_turn_is_kept() -> None:
    recs = copy.deepcopy(records("ngram-random")[:2])
    cut = recs[1]
    for key in ("usage", "metrics", "finish_reason", "counters", "ended"):
        cut[key] = None
    cut["chunks"] = cut["chunks"][:3]
    cut["error"] = "vLLM's chat request failed: APIError: EngineCore encountered an issue."
    journal = MemoryJournal()
    rec = record(recs, "ngram-simple", 8, journal, error="the engine core died")
    assert len(rec.turns) == 1 and rec.error == "the engine core died"
    second = [(e.trigger, e.payload) for e in journal.events if e.turn == 2]
    assert [t for t, _ in second] == [Trigger.START_TURN, Trigger.CTX_RESTORE,
                                      Trigger.PREFILL, Trigger.FAIL]
    assert second[0][1]["append"][-3:] == cut["prompt_token_ids"][-3:]
    assert second[2][1]["append"] == cut["chunks"][0][:1]


@pytest.mark.parametrize("drafter", ["ngram-mod", "ngram-simple,mtp"])
def test_what_vllm_cannot_run_is_a_usage_error(drafter: str) -> None:
    from specledger.errors import UsageError

    with pytest.raises(UsageError):
        VllmEngine(RunConfig(backend="vllm", model="shipped:target",  # type: ignore[arg-type]
                             drafter=drafter))
