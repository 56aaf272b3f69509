"""The incident scenarios: one per known incident, each a valid llama run of the build it is
asked of, and what each build's source expects of it."""

from adapters.llama.builds.incidents import INCIDENTS, by_key
from adapters.llama.builds.matrix import MATRIX, Exposure, facts
from adapters.llama.builds.scenarios import (
    QUICK,
    SCENARIOS,
    Verdict,
    absent_reason,
    expected,
    quick_scenario,
)
from engine.config import BackendKind


def test_every_incident_has_a_scenario_that_runs_on_llama() -> None:
    assert set(SCENARIOS) == {i.key for i in INCIDENTS}
    assert set(QUICK) <= set(SCENARIOS)
    for key, s in SCENARIOS.items():
        cfg = s.config("0.3.30")
        assert cfg.backend is BackendKind.LLAMA and cfg.llama_build == "0.3.30"
        assert (cfg.drafter, cfg.turns, cfg.max_answer_tokens, cfg.draft_max) == (
            s.drafter, s.turns, s.max_answer_tokens, s.draft_max), key
        assert 1 <= s.from_turn <= s.turns
        assert f"--llama-build 0.3.30 --drafter {s.drafter} " in s.command("0.3.30")
        small = quick_scenario(s)
        assert small.turns <= s.turns and small.max_answer_tokens <= s.max_answer_tokens


def test_the_cpu_bound_incidents_share_one_run() -> None:
    assert SCENARIOS["#23268"].run_key == SCENARIOS["#28060"].run_key
    assert len({s.run_key for s in SCENARIOS.values()}) == len(SCENARIOS) - 1


def test_what_each_builds_source_expects() -> None:
    for version in MATRIX:
        build = facts(version)
        assert build is not None
        for incident in INCIDENTS:
            exposure = build.exposures[incident.key]
            verdict = expected(build, incident)
            if exposure is Exposure.ABSENT:
                assert verdict is Verdict.ABSENT and absent_reason(incident, build)
            elif exposure is Exposure.FIXED:
                assert verdict is Verdict.CLEAN
            else:
                assert verdict is (Verdict.NOT_ON_CPU if incident.cpu else Verdict.NAMED)
    old, new, fixed = facts("0.3.20"), facts("0.3.24"), facts("0.3.36")
    assert old is not None and new is not None and fixed is not None
    assert "speculative checkpoints" in absent_reason(by_key("PR 26320"), old)
    assert expected(new, by_key("PR 26320")) is Verdict.NAMED
    assert expected(fixed, by_key("PR 26320")) is Verdict.CLEAN
    assert expected(fixed, by_key("#28060")) is Verdict.NOT_ON_CPU


def test_draft_self_drafts_with_the_target() -> None:
    s = SCENARIOS["PR 22521"]
    assert s.draft_self and s.drafter == "draft-model"
    cfg = s.config("0.3.24", model="/m/target", draft_model="/m/draft")
    assert cfg.draft_model == cfg.model == "/m/target"
    other = SCENARIOS["PR 26320"].config("0.3.24", model="/m/target", draft_model="/m/draft")
    assert other.draft_model == "/m/draft"
