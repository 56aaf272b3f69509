"""Answers are matched to tasks by their shape as `import --responses` and `watch
--responses-from` match them: prompt tokens and tokens generated, each answer once, in log
order; a dimension the log does not give matches any."""

from adapters.llama.ledger.responses import ResponseFacts, match_responses


def _answer(index: int, prompt: int, generated: int) -> ResponseFacts:
    return ResponseFacts(index, cache_n=prompt - 10, prompt_n=10, predicted_n=generated,
                         draft_n=0, draft_accepted=0, finish_reason="stop", fingerprint=None)


def test_an_answer_must_have_the_task_s_prompt_and_length() -> None:
    short, long, other = _answer(0, 100, 12), _answer(1, 100, 16), _answer(2, 90, 16)
    assert match_responses([(100, 16)], [short, other, long]) == [long]
    assert match_responses([(100, 20)], [short, other, long]) == [None]
    assert match_responses([(80, 16)], [short, other, long]) == [None]


def test_each_answer_is_taken_once_in_log_order() -> None:
    a, b = _answer(0, 100, 16), _answer(1, 100, 16)
    assert match_responses([(100, 16), (100, 16), (100, 16)], [a, b]) == [a, b, None]


def test_what_the_log_does_not_say_matches_any() -> None:
    a, b = _answer(0, 100, 12), _answer(1, 90, 16)
    assert match_responses([(None, 16)], [a, b]) == [b]
    assert match_responses([(90, None)], [a, b]) == [b]
