"""Reading vLLM's completions: top logprobs by token id, best first; an answer that names
tokens by text is refused rather than mapped back by a guess."""

import pytest

from adapters.vllm.client import parse_completion
from adapters.vllm.errors import ServerRequestError


def answer(top: list[dict[str, float]]) -> dict:
    """A /v1/completions answer as vLLM 0.32 writes it (return_tokens_as_token_ids)."""
    return {"choices": [{"index": 0, "text": "cc", "finish_reason": "length",
                         "token_ids": [99, 99],
                         "logprobs": {"tokens": ["token_id:99", "token_id:99"],
                                      "token_logprobs": [-3.4, -3.3], "top_logprobs": top}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 2}}


def test_top_candidates_are_ids_best_first_with_their_gap() -> None:
    c = parse_completion(answer([{"token_id:162": -4.5, "token_id:99": -3.5},
                                 {"token_id:99": -3.25}]))
    assert c.tokens == [99, 99] and c.prompt_tokens == 9 and c.finish_reason == "length"
    assert c.top[0] == [(99, -3.5), (162, -4.5)]
    assert c.gap(0) == 1.0 and c.gap(1) is None


def test_tokens_named_by_text_are_refused() -> None:
    with pytest.raises(ServerRequestError, match="return_tokens_as_token_ids"):
        parse_completion(answer([{"c": -3.4}]))
