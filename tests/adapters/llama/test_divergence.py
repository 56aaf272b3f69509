"""The differential comparison's pure parts: where two answers part, with our gap there."""

import math

from adapters.llama.client import Completion
from adapters.llama.differential import GAP_BOUND, Reference, compare, first_divergence, report

REF = Reference(prompt=(1, 2), tokens=(5, 6, 7, 258), gaps=(3.0, 2e-4, 1.5, 4.0))


def completion(tokens: list[int], drafted: int = 0, accepted: int = 0) -> Completion:
    """A completion carrying only what the comparison reads."""
    return Completion(tokens=tokens, stop_type="eos", prompt_n=2, prompt_ms=1.0,
                      predicted_n=len(tokens), predicted_ms=1.0, predicted_per_second=1.0,
                      draft_n=drafted, draft_accepted=accepted)


def test_identical_answers_do_not_diverge() -> None:
    assert first_divergence(0, REF, [5, 6, 7, 258]) is None


def test_divergence_at_a_near_tie() -> None:
    d = first_divergence(3, REF, [5, 9, 7, 258])
    assert d is not None and (d.prompt, d.position, d.ours, d.theirs) == (3, 1, 6, 9)
    assert d.gap == 2e-4 and d.near_tie


def test_divergence_at_a_clear_winner_is_no_tie() -> None:
    d = first_divergence(0, REF, [5, 6, 8])
    assert d is not None and d.position == 2 and d.gap == 1.5 > GAP_BOUND
    assert not d.near_tie


def test_length_difference_is_no_tie() -> None:
    longer = first_divergence(0, REF, [5, 6, 7, 258, 10])
    shorter = first_divergence(0, REF, [5, 6])
    assert longer is not None and (longer.position, longer.ours, longer.theirs) == (4, None, 10)
    assert shorter is not None and (shorter.position, shorter.ours, shorter.theirs) == (2, 7,
                                                                                          None)
    assert math.isinf(longer.gap) and not longer.near_tie and not shorter.near_tie


def test_compare_counts_and_reports() -> None:
    result = compare("mtp", [REF, REF], [completion([5, 6, 7, 258], 4, 3),
                                         completion([5, 9], 2, 0)])
    assert (result.answers, result.identical, result.drafted, result.accepted) == (2, 1, 6, 3)
    assert [d.prompt for d in result.divergences] == [1] and result.explained
    text = report([result])
    assert "mtp: 1/2 token-identical, 1 divergent, acceptance 0.50" in text
    assert "prompt 1 position 1: ours 6, llama 9, our top-2 gap 0.0002 (near-tie)" in text
