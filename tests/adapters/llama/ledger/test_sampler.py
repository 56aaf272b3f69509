"""The sampler on both sides of a llama-server request: a run sends every parameter that
would otherwise take llama-server's default, and the sampler the server logs for each
request (captured logs, -v) is compared with the one the session records: a difference is
a finding."""

from typing import Any

import pytest

from adapters.llama.ledger.fold import fold_tasks
from adapters.llama.ledger.provenance import Provenance, session_config
from adapters.llama.ledger.record import record_log
from adapters.llama.ledger.sampler import claimed
from adapters.llama.log.reader import parse_log
from adapters.llama.server.conversation import _request
from adapters.protocol import Sampling
from engine.session import MemoryJournal
from eventlog.postmortem import Kind, Severity, analyze
from fsm.states import Trigger
from tests.adapters.llama.log.test_reader import fixture_text


def _postmortem(name: str, run: dict[str, Any] | None) -> dict[Kind, Any]:
    """The postmortem of a captured log imported as a run with settings `run`."""
    reading = parse_log(fixture_text(name))
    journal = MemoryJournal()
    result = record_log(reading, journal)
    config = session_config(reading, result.fold, Provenance(run=run), None, 0)
    found, _ = analyze(journal.events, config)
    return {f.kind: f for f in found}


def test_the_log_names_each_requests_sampler() -> None:
    text = fixture_text("mtp")
    tasks = fold_tasks(parse_log(text).records).tasks
    assert len(tasks) == text.count("sampler chain:") == 2
    for task in tasks:
        assert task.sampler_chain is not None and task.sampler_params is not None
        # llama-server's defaults: the request sent temperature, top_k, top_p, seed only.
        assert task.sampler_chain.active == ("top-k", "top-p", "min-p", "temp-ext", "dist")
        assert task.sampler_params.get("min_p") == 0.05
        assert task.sampler_params.get("top_k") == 40
    journal = MemoryJournal()
    record_log(parse_log(text), journal)
    starts = [e.payload["sampler"] for e in journal.events if e.trigger is Trigger.START_TURN]
    assert starts[0]["top_k"] == 40 and starts[0]["min_p"] == 0.05
    assert starts[0]["order"] == ["top_k", "top_p", "min_p", "temperature"]


def test_a_session_claiming_the_full_distribution_is_told_what_was_used() -> None:
    run = {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0, "turns": 2}
    found = _postmortem("mtp", run)[Kind.SAMPLER_MISMATCH]
    assert [(r["what"], r["used"]) for r in found.numbers["first"]] == [
        ("top_k", 40), ("top_p", 0.95), ("min_p", 0.05)]
    assert found.numbers["turns"] == found.numbers["turns_checked"] == 2
    assert found.severity is Severity.WARNING  # greedy: the argmax is kept, the record wrong
    # Sampled, the same server settings draw from another distribution.
    sampled = _postmortem("mtp", {**run, "temperature": 0.7})[Kind.SAMPLER_MISMATCH]
    assert sampled.severity is Severity.ERROR
    assert "temperature" in [r["what"] for r in sampled.numbers["first"]]


SAMPLED = {"temperature": 0.7, "top_k": 20, "top_p": 0.9, "seed": 0, "turns": 2}
"""The run chain-sampled.log.gz was recorded with (fixtures/README.md)."""


def test_a_run_samples_as_its_session_says() -> None:
    # Recorded by `run --backend llama` with the request of adapters/llama/ledger/sampler.py.
    text = fixture_text("chain-sampled")
    assert text.count("sampler chain: logits -> temp-ext -> top-k -> top-p -> dist") == 2
    found = _postmortem("chain-sampled", SAMPLED)
    assert Kind.SAMPLER_MISMATCH not in found
    journal = MemoryJournal()
    record_log(parse_log(text), journal)
    for p in (e.payload for e in journal.events if e.trigger is Trigger.START_TURN):
        assert p["sampler"]["order"] == ["temperature", "top_k", "top_p"]
        assert (p["sampler"]["min_p"], p["sampler"]["others"]) == (0.0, [])
    # The same log against a session that says it sampled the full distribution.
    full = _postmortem("chain-sampled", {**SAMPLED, "top_k": 0, "top_p": 1.0})
    rows = full[Kind.SAMPLER_MISMATCH].numbers["first"]
    assert [(r["what"], r["used"]) for r in rows] == [("top_k", 20), ("top_p", 0.9)]
    assert full[Kind.SAMPLER_MISMATCH].severity is Severity.ERROR


def test_the_order_counts_where_the_temperature_reshapes() -> None:
    # llama-server's default order cuts top-p before the temperature; ours after.
    found = _postmortem("mtp", {"temperature": 0.7, "top_k": 0, "top_p": 0.95, "seed": 0})
    rows = {r["what"]: r for r in found[Kind.SAMPLER_MISMATCH].numbers["first"]}
    assert rows["order"]["claimed"] == ["temperature", "top_p"]
    assert rows["order"]["used"] == ["top_k", "top_p", "min_p", "temperature"]
    assert "top_p" not in rows  # the value agrees: 0.95 both


def test_an_import_without_a_claim_or_a_log_without_v_checks_nothing() -> None:
    assert Kind.SAMPLER_MISMATCH not in _postmortem("mtp", None)
    quiet = _postmortem("quiet", {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0})
    assert Kind.SAMPLER_MISMATCH not in quiet
    assert "sampler" in quiet[Kind.CHECK_SKIPPED].numbers["skipped"]


@pytest.mark.parametrize("temperature,top_k,top_p,order", [
    (0.0, 0, 1.0, ["temperature"]), (0.7, 20, 0.9, ["temperature", "top_k", "top_p"])])
def test_a_request_leaves_no_sampler_to_the_servers_defaults(
        temperature: float, top_k: int, top_p: float, order: list[str]) -> None:
    body = _request(Sampling(temperature, top_k, top_p, seed=5, max_tokens=8),
                    [{"role": "user", "content": "x"}], stream=False)
    extra = body["extra_body"]
    assert (body["temperature"], extra["top_k"], body["top_p"], body["seed"]) == (
        temperature, top_k, top_p, 5)
    # Every llama-server default that cuts or reshapes the distribution, switched off
    # (common/common.h: min_p 0.05; the others are idle there already, but sent).
    assert extra["min_p"] == 0.0 and extra["typical_p"] == 1.0 and extra["mirostat"] == 0
    assert extra["repeat_penalty"] == 1.0 and extra["dry_multiplier"] == 0.0
    assert extra["xtc_probability"] == 0.0 and extra["top_n_sigma"] == -1.0
    assert body["presence_penalty"] == body["frequency_penalty"] == 0.0
    # Our order: the temperature first, then top-k and top-p, nothing else; the session
    # claims the ones that cut something.
    assert extra["samplers"] == ["temperature", "top_k", "top_p"]
    assert claimed(temperature, top_k, top_p)["order"] == order
