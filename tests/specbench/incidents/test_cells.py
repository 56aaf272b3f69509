"""The cells of the incidents table, judged on real logs' postmortems: the fixed build's
restores leave PR 26320's cell clean, the same log counted as a build before the fix is
named with its numbers, a CPU-bound incident is not reproducible with its evidence (the
restores, none repeated), and the report-built livelock log names #28060."""

import gzip
from typing import Any

from adapters.llama.builds.incidents import by_key
from adapters.llama.builds.matrix import facts
from adapters.llama.builds.scenarios import SCENARIOS, Verdict, expected
from fsm.states import Trigger
from specbench.incidents.cells import Cell, judge
from tests.adapters.llama.log.test_reader import FIXTURES, fixture_text
from tests.adapters.llama.test_postmortem import imported_text
from tests.eventlog.test_postmortem_inflation import counted_before_the_fix


def postmortem(text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The postmortem (its JSON form's findings) and turn metrics of a log's import."""
    found, events = imported_text(text)
    turns = [ev.payload["metrics"] for ev in events if ev.trigger is Trigger.END_TURN]
    return {"findings": [f.to_dict() for f in found]}, turns


def cell(key: str, version: str, text: str) -> Cell:
    build = facts(version)
    assert build is not None
    incident = by_key(key)
    post, turns = postmortem(text)
    return judge(incident, SCENARIOS[key], expected(build, incident), 7, post, turns)


def test_the_fixed_build_is_clean_and_a_build_before_the_fix_is_named() -> None:
    text = fixture_text("ngram-mod")
    clean = cell("PR 26320", "0.3.36", text)
    assert clean.verdict is Verdict.CLEAN and clean.as_expected and clean.sessions == (7,)
    assert clean.numbers["restores"] == text.count("restoring speculative checkpoint") > 0
    before, _ = counted_before_the_fix(text)
    named = cell("PR 26320", "0.3.24", before)
    assert named.verdict is Verdict.NAMED and named.as_expected
    assert named.numbers["restores"] == 3 and "turn 1 round" in named.why
    assert "inflation_points" in named.why and named.others == ()
    assert named.short() == "**named** (s7)"
    # The same count on the fixed build's facts: named where the source says clean.
    surprise = cell("PR 26320", "0.3.36", before)
    assert not surprise.as_expected and "source says clean" in surprise.short()


def test_a_cpu_bound_incident_is_not_reproducible_with_its_evidence() -> None:
    text = fixture_text("ngram-mod")
    c = cell("#28060", "0.3.36", text)
    restores = text.count("restoring speculative checkpoint")
    assert c.verdict is Verdict.NOT_ON_CPU and c.as_expected
    assert f"{restores} restore(s), each followed by one replay" in c.why
    assert "batch shape" in c.why


def test_the_report_built_livelock_is_named() -> None:
    text = gzip.decompress((FIXTURES / "reports" / "livelock-28060.log.gz").read_bytes()
                           ).decode(errors="surrogateescape")
    c = cell("#28060", "0.3.36", text)
    assert c.verdict is Verdict.NAMED and c.numbers["worst_restores"] == 5362
    assert c.others == ()  # the log ends inside the loop: a note, not another error


def test_a_reprefill_is_named_with_its_size() -> None:
    edited = cell("#24055", "0.3.36", fixture_text("edited-history"))
    assert edited.verdict is Verdict.NAMED and edited.numbers["reprefill_tokens"] > 0
    assert "unknown" not in edited.why
    # 0.3.24 restores the prompt-end checkpoint at the next request of an unedited history
    # too; it prints no LCP line, so the kept prefix is its checkpoint check's threshold
    # plus n_swa + 1: 27 tokens re-prefilled in this capture.
    plain = gzip.decompress((FIXTURES / "builds" / "0.3.24" / "plain.log.gz").read_bytes()
                            ).decode(errors="surrogateescape")
    old = cell("#24055", "0.3.24", plain)
    assert old.verdict is Verdict.NAMED and old.as_expected and old.sessions == (7,)
    assert old.numbers["reprefill_tokens"] == 27 and "unknown" not in old.why
    clean = cell("#24055", "0.3.36", fixture_text("plain"))
    assert clean.verdict is Verdict.CLEAN
