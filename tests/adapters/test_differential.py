"""The differential comparison's pure parts (adapters/differential.py): where two answers
part, each engine's gap there, the near-tie verdict by dtype, which runs are compared with
which, and the postmortem's name for a speculative run that is not lossless."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.differential import (
    Answer,
    Relation,
    Run,
    compare,
    compare_runs,
    first_divergence,
    near_tie_bound,
    not_lossless_findings,
    report,
)
from engine.config import DType
from engine.errors import ConfigError
from eventlog.postmortem.finding import Kind, Severity

F32, BF16 = DType.FLOAT32, DType.BFLOAT16
B32 = near_tie_bound(F32)
REF = Answer((5, 6, 7, 258), (3.0, B32 / 5, 1.5, 4.0))


def answer(tokens: list[int], gaps: list[float | None] | None = None, drafted: int = 0,
           accepted: int = 0) -> Answer:
    """An answer whose gaps are large (clear winners) unless given."""
    return Answer(tuple(tokens), tuple(gaps if gaps is not None else [5.0] * len(tokens)),
                  drafted, accepted)


def run(engine: str, method: str, dtype: DType, *answers: Answer) -> Run:
    """A run of the given answers."""
    return Run(engine, method, dtype, answers)


def test_identical_answers_do_not_diverge() -> None:
    assert first_divergence(0, REF, answer([5, 6, 7, 258]), B32) is None


def test_divergence_at_a_near_tie_in_both_engines() -> None:
    d = first_divergence(3, REF, answer([5, 9, 7, 258], [3.0, B32 / 2, 1.0, 1.0]), B32)
    assert d is not None and (d.prompt, d.position, d.expected, d.actual) == (3, 1, 6, 9)
    assert (d.expected_gap, d.actual_gap) == (B32 / 5, B32 / 2) and d.near_tie


def test_a_gap_one_engine_does_not_report_leaves_the_other_to_judge() -> None:
    d = first_divergence(0, REF, answer([5, 9], [None, None]), B32)
    assert d is not None and d.actual_gap is None and d.near_tie
    blind = first_divergence(0, answer([5, 6], [None, None]), answer([5, 9], [None, None]), B32)
    assert blind is not None and not blind.near_tie  # nobody says it is a tie


def test_a_tie_on_one_side_only_is_no_near_tie() -> None:
    # Plain saw a near-tie, the other run a clear winner: its logits moved, not rounding.
    d = first_divergence(0, REF, answer([5, 9, 7], [3.0, 2.0, 1.0]), B32)
    assert d is not None and d.position == 1 and not d.near_tie


def test_divergence_at_a_clear_winner_is_no_tie() -> None:
    d = first_divergence(0, REF, answer([5, 6, 8]), B32)
    assert d is not None and d.position == 2 and d.expected_gap == 1.5 > B32
    assert not d.near_tie


def test_length_difference_is_no_tie() -> None:
    longer = first_divergence(0, REF, answer([5, 6, 7, 258, 10]), B32)
    shorter = first_divergence(0, REF, answer([5, 6], [3.0, B32 / 5]), B32)
    assert longer is not None and (longer.position, longer.expected, longer.actual) == (
        4, None, 10)
    assert shorter is not None and (shorter.position, shorter.expected, shorter.actual) == (
        2, 7, None)
    assert longer.expected_gap is None and not longer.near_tie and not shorter.near_tie


def test_bf16_bound_is_looser_and_rules_a_mixed_pair() -> None:
    assert near_tie_bound(BF16) > near_tie_bound(F32)
    gap = (near_tie_bound(F32) + near_tie_bound(BF16)) / 2
    ref = run("ours", "none", F32, answer([1, 2], [1.0, gap]))
    other = answer([1, 3], [1.0, gap])
    assert not compare(Relation.CROSS_ENGINE, ref, run("x", "none", F32, other)).explained
    mixed = compare(Relation.CROSS_ENGINE, ref, run("x", "none", BF16, other))
    assert mixed.bound == near_tie_bound(BF16) and mixed.explained


@given(st.lists(st.integers(0, 9), max_size=12), st.lists(st.integers(0, 9), max_size=12))
def test_divergence_is_at_the_common_prefix_length(a: list[int], b: list[int]) -> None:
    d = first_divergence(0, answer(a), answer(b), B32)
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    if a == b:
        assert d is None
    else:
        assert d is not None and d.position == common
        assert d.expected == (a[common] if common < len(a) else None)
        assert d.actual == (b[common] if common < len(b) else None)


def test_answer_needs_a_gap_per_token() -> None:
    with pytest.raises(ConfigError, match="2 gaps for 3 tokens"):
        Answer((1, 2, 3), (1.0, 1.0))


ANSWERS = [answer([1, 2, 3]), answer([4, 5, 6])]


def three_engines(vllm_ngram: list[Answer]) -> list[Run]:
    """Ours in both dtypes, llama.cpp plain and with a drafter, vLLM plain and ngram."""
    return [run("ours", "none", F32, *ANSWERS), run("ours", "none", BF16, *ANSWERS),
            run("llama.cpp", "none", F32, *ANSWERS),
            run("llama.cpp", "ngram-mod", F32, *ANSWERS),
            run("vllm", "none", BF16, *ANSWERS), run("vllm", "ngram", BF16, *vllm_ngram)]


def test_compare_runs_pairs_each_run_with_its_reference() -> None:
    found = [(c.relation, c.run.label, c.reference.label)
             for c in compare_runs("ours", three_engines(ANSWERS))]
    assert found == [
        (Relation.CROSS_ENGINE, "llama.cpp none float32", "ours none float32"),
        (Relation.SPECULATIVE, "llama.cpp ngram-mod float32", "llama.cpp none float32"),
        (Relation.CROSS_ENGINE, "vllm none bfloat16", "ours none bfloat16"),
        (Relation.SPECULATIVE, "vllm ngram bfloat16", "vllm none bfloat16"),
        (Relation.PRECISION, "ours none bfloat16", "ours none float32"),
    ]


def test_a_speculative_run_needs_its_engines_plain_run() -> None:
    with pytest.raises(ConfigError, match="no plain run of vllm in bfloat16"):
        compare_runs("ours", [run("vllm", "ngram", BF16, *ANSWERS)])


def test_speculation_that_changes_a_clear_answer_is_named_not_lossless() -> None:
    # vLLM #39273's shape: ngram answers leave plain ones where plain had a clear winner,
    # while most drafts are accepted.
    corrupted = [answer([1, 2, 3], drafted=4, accepted=4),
                 answer([4, 7, 7], [5.0, 3.0, 3.0], drafted=6, accepted=5)]
    comparisons = compare_runs("ours", three_engines(corrupted))
    spec = next(c for c in comparisons if c.run.label == "vllm ngram bfloat16")
    assert spec.relation is Relation.SPECULATIVE and spec.identical == 1
    assert [d.position for d in spec.not_lossless] == [1]
    (finding,) = not_lossless_findings(comparisons)
    assert finding.kind is Kind.SPECULATIVE_NOT_LOSSLESS and finding.severity is Severity.ERROR
    assert finding.numbers["engine"] == "vllm" and finding.numbers["method"] == "ngram"
    assert (finding.numbers["prompt"], finding.numbers["position"]) == (1, 1)
    assert (finding.numbers["expected"], finding.numbers["actual"]) == (5, 7)
    assert "#39273" in finding.explanation and "Acceptance was 0.90" in finding.explanation
    assert finding.to_dict()["kind"] == "speculative_not_lossless"


def test_near_ties_and_other_relations_are_not_named() -> None:
    tie = near_tie_bound(BF16) / 2
    tied = [answer([1, 2, 3]), answer([4, 7], [5.0, tie])]
    runs = three_engines(ANSWERS)
    runs[4] = run("vllm", "none", BF16, answer([1, 2, 3]), answer([4, 5, 6], [5.0, tie, 1.0]))
    runs[5] = run("vllm", "ngram", BF16, *tied)
    split = [answer([1, 2, 3]), answer([4, 8, 6])]  # llama.cpp leaves ours at a clear winner
    runs[2], runs[3] = run("llama.cpp", "none", F32, *split), run("llama.cpp", "ngram-mod", F32,
                                                                  *split)
    comparisons = compare_runs("ours", runs)
    assert not not_lossless_findings(comparisons)  # a cross-engine split is no speculation bug
    assert not next(c for c in comparisons if c.run.label == "llama.cpp none float32").explained


def test_report_lists_each_divergence_with_both_gaps() -> None:
    ref = run("ours", "none", F32, REF, REF)
    other = run("llama.cpp", "draft-mtp", F32, answer([5, 6, 7, 258], drafted=4, accepted=3),
                answer([5, 9], [3.0, B32 / 2], drafted=2))
    result = compare(Relation.SPECULATIVE, ref, other)
    assert (result.answers, result.identical, result.explained) == (2, 1, True)
    text = report([result])
    assert ("llama.cpp draft-mtp float32 vs ours none float32 (speculative): 1/2 "
            "token-identical, 1 divergent, acceptance 0.50, near-tie bound 0.001") in text
    assert "prompt 1 position 1: 6 vs 9, gaps 0.0002 / 0.0005 (near-tie)" in text
    assert result.to_dict()["divergences"][0]["near_tie"] is True
    assert not math.isnan(result.bound)


def test_drift_is_the_gap_difference_where_the_answers_still_agree() -> None:
    ref = run("ours", "none", BF16, answer([1, 2, 3], [1.0, 2.0, 3.0]),
              answer([4, 5, 6], [1.0, 0.1, 2.0]))
    other = run("vllm", "none", BF16, answer([1, 2, 3], [1.25, None, 2.5]),
                answer([4, 7, 6], [0.875, 0.05, 9.0]))
    result = compare(Relation.CROSS_ENGINE, ref, other)
    # Prompt 0 agrees throughout (its unreported gap skipped); prompt 1 until position 1.
    assert sorted(result.drift) == [0.125, 0.25, 0.5]
    assert result.to_dict()["drift"] == {"positions": 3, "max": 0.5, "median": 0.25}
    assert "gaps moved by at most 0.5 (median 0.25) over 3 shared positions" in report([result])


def test_a_prompt_the_engine_died_on_is_reported_not_compared() -> None:
    died = Answer((), (), error="ServerDiedError: tensor a (7) vs b (6)")
    spec = run("vllm", "ngram", BF16, died, answer([4, 7, 6]))
    runs = [run("ours", "none", BF16, *ANSWERS), run("vllm", "none", BF16, *ANSWERS), spec]
    comparisons = compare_runs("ours", runs)
    result = next(c for c in comparisons if c.run is spec)
    assert result.failed == [(0, died.error)] and result.identical == 0
    assert [d.prompt for d in result.divergences] == [1]
    assert "1 without an answer (first: prompt 0: ServerDiedError" in report([result])
    (finding,) = not_lossless_findings(comparisons)
    assert finding.numbers["failed"] == 1 and finding.numbers["answers"] == 1
    assert "1 more prompt(s) got no answer: the engine died on them" in finding.explanation
