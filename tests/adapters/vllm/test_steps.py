"""Placing vLLM's engine steps in a streamed answer: one chunk per step, verify steps in
vLLM's order, plain steps between them; placed only where exactly one reading fits."""

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.vllm.steps import Step, StepKind, place_steps


def test_a_real_ngram_answer_is_placed() -> None:
    # vLLM 0.32, ngram k=8 on a random-weight model, 48 tokens (length stop): three
    # plain steps before the lookup found a match, the last step cut by the limit.
    steps = place_steps([1, 1, 1, 1, 2, 4, 8, 9, 9, 9, 3], [1, 3, 7, 8, 8, 8, 8],
                        [1, 3, 7, 8, 8, 8, 8])
    assert steps is not None
    assert [s.kind for s in steps] == [StepKind.PREFILL, *[StepKind.PLAIN] * 3,
                                       *[StepKind.VERIFY] * 7]
    assert [s.start for s in steps] == [0, 1, 2, 3, 4, 6, 10, 18, 27, 36, 45]
    assert (steps[-1].emitted, steps[-1].cut) == (3, 6)


def test_a_rejected_draft_among_plain_steps_is_not_placed() -> None:
    # One token each: which of the two was the verify step that accepted nothing?
    assert place_steps([1, 1, 1], [4], [0]) is None


def test_merged_chunks_are_not_placed() -> None:
    # Two steps of 3 and 2 tokens arrived as one chunk of 5.
    assert place_steps([1, 5], [2, 1], [2, 1]) is None


def test_plain_decoding_is_one_token_per_chunk() -> None:
    steps = place_steps([1, 1, 1], (), ())
    assert steps is not None and [s.kind for s in steps] == [StepKind.PREFILL,
                                                            StepKind.PLAIN, StepKind.PLAIN]
    assert place_steps([1, 2], (), ()) is None  # a merge
    assert place_steps([2], (), ()) is None     # the prefill emits one token


@st.composite
def answers(draw: st.DrawFn) -> tuple[list[Step], list[int]]:
    """A true sequence of steps (k up to 4, the last possibly cut) and its chunks."""
    k = draw(st.integers(1, 4))
    steps, start = [Step(StepKind.PREFILL, 0, 1)], 1
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.booleans()):
            steps.append(Step(StepKind.PLAIN, start, 1))
            start += 1
        else:
            j = draw(st.integers(0, k))
            steps.append(Step(StepKind.VERIFY, start, j + 1, draw(st.integers(max(j, 1), k)),
                              j))
            start += j + 1
    last = steps[-1]
    if last.kind is StepKind.VERIFY and draw(st.booleans()):
        emitted = draw(st.integers(1, last.emitted))
        steps[-1] = Step(StepKind.VERIFY, last.start, emitted, last.drafted, last.accepted)
    return steps, [s.emitted for s in steps]


@settings(max_examples=200, deadline=None)
@given(answers())
def test_a_placement_is_the_truth_or_none(case: tuple[list[Step], list[int]]) -> None:
    truth, chunks = case
    verify = [s for s in truth if s.kind is StepKind.VERIFY]
    placed = place_steps(chunks, [s.drafted for s in verify], [s.accepted for s in verify])
    assert placed is None or placed == truth
    # Without plain steps (MTP, a draft model) there is nothing to confuse.
    if all(s.kind is not StepKind.PLAIN for s in truth):
        assert placed == truth
