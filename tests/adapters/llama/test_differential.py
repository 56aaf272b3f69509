"""Differential test of two engines (adapters/llama/differential.py): llama-server's greedy
answers to 50 held-out prompts, plain and with draft-mtp, ngram-mod and draft-simple,
against our engine's greedy plain answers, token for token. Each divergence is printed
with our top-2 logit gap there and must be a near-tie (gap <= GAP_BOUND)."""

import json
from collections.abc import Callable
from typing import Any

import pytest

from adapters.llama.differential import (
    ANSWER_CAP,
    GAP_BOUND,
    Reference,
    compare,
    held_out_prompts,
    reference_answer,
    report,
)
from adapters.llama.options import ServerOptions, parse_drafters
from adapters.llama.server import LlamaServer
from tests.adapters.llama.conftest import Ggufs

N_PROMPTS = 50
DRAFTERS = ("none", "mtp", "ngram-mod", "draft-model")


@pytest.fixture(scope="session")
def references(target_checkpoint: Any) -> list[Reference]:
    """Our greedy answers to the held-out prompts, computed once per session."""
    prompts = held_out_prompts(target_checkpoint, N_PROMPTS)
    assert len({tuple(p) for p in prompts}) == N_PROMPTS
    model = target_checkpoint.model
    return [reference_answer(model, p) for p in prompts]


@pytest.mark.parametrize("drafter", DRAFTERS)
def test_answers_equal_ours_up_to_near_ties(
        drafter: str, references: list[Reference], ggufs: Ggufs,
        tmp_path_factory: pytest.TempPathFactory,
        record_property: Callable[[str, object], None]) -> None:
    opts = ServerOptions(model=ggufs.target, drafters=parse_drafters(drafter),
                         draft_model=ggufs.draft, verbose=False)
    log = tmp_path_factory.mktemp("differential") / f"{drafter}.log"
    with LlamaServer(opts, log) as server:
        answers = [server.client.complete(r.prompt, ANSWER_CAP) for r in references]
    result = compare(drafter, references, answers)
    print(f"\n{report([result])}")
    record_property(f"differential_{drafter}", json.dumps(result.to_dict()))
    assert result.answers == N_PROMPTS
    assert sum(len(r.tokens) for r in references) > 20 * N_PROMPTS  # real answers
    if drafter != "none":
        assert result.drafted > 0 and 0 < result.accepted <= result.drafted
    assert result.explained, f"a divergence is no near-tie (gap > {GAP_BOUND}):\n" \
                             f"{report([result])}"
