"""Differential test of llama.cpp against our engine (adapters/differential.py) on the
shipped target, both in float32: llama-server's greedy answers to 50 held-out prompts,
plain against ours and with draft-mtp, ngram-mod and draft-simple against its own plain
ones, token for token. Each divergence is printed with both engines' top-2 gaps there and
must be a near-tie. (The three-engine test, vLLM included, runs on shipped:wide:
tests/adapters/test_three_engines.py.)"""

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from adapters.answers import ANSWER_CAP, held_out_prompts, llama_answers, our_answer
from adapters.differential import Run, compare_runs, not_lossless_findings, report
from adapters.llama.server.options import ServerOptions, parse_drafters
from adapters.llama.server.process import LlamaServer
from engine.config import DType
from tests.adapters.llama.conftest import Ggufs

N_PROMPTS = 50
DRAFTERS = ("mtp", "ngram-mod", "draft-model")
OURS, LLAMA = "ours", "llama.cpp"


@pytest.fixture(scope="module")
def prompts(target_checkpoint: Any) -> list[list[int]]:
    """The held-out prompts."""
    found = held_out_prompts(target_checkpoint, N_PROMPTS)
    assert len({tuple(p) for p in found}) == N_PROMPTS
    return found


@pytest.fixture(scope="module")
def ours(target_checkpoint: Any, prompts: list[list[int]]) -> Run:
    """Our greedy answers to the prompts, computed once per module."""
    model = target_checkpoint.model
    return Run(OURS, "none", DType.FLOAT32, tuple(our_answer(model, p) for p in prompts))


def llama_run(drafter: str, prompts: list[list[int]], ggufs: Ggufs,
              tmp_path_factory: pytest.TempPathFactory) -> Run:
    """llama-server's answers with `drafter` (none: plain)."""
    opts = ServerOptions(model=ggufs.target, drafters=parse_drafters(drafter),
                         draft_model=ggufs.draft, verbose=False)
    log = tmp_path_factory.mktemp("differential") / f"{drafter}.log"
    with LlamaServer(opts, log) as server:
        return Run(LLAMA, drafter, DType.FLOAT32, llama_answers(server.client, prompts))


@pytest.fixture(scope="module")
def llama_plain(prompts: list[list[int]], ggufs: Ggufs,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """llama-server's plain answers, once per module."""
    yield llama_run("none", prompts, ggufs, tmp_path_factory)


def test_plain_answers_equal_ours_up_to_near_ties(
        ours: Run, llama_plain: Run, record_property: Callable[[str, object], None]) -> None:
    (result,) = compare_runs(OURS, [ours, llama_plain])
    print(f"\n{report([result])}")
    record_property("differential_none", json.dumps(result.to_dict()))
    assert sum(len(a.tokens) for a in ours.answers) > 20 * N_PROMPTS  # real answers
    assert all(len(a.tokens) <= ANSWER_CAP for a in llama_plain.answers)
    assert all(None not in a.gaps for a in llama_plain.answers)  # n_probs answered
    assert result.explained, f"a divergence is no near-tie:\n{report([result])}"


@pytest.mark.parametrize("drafter", DRAFTERS)
def test_speculative_answers_equal_plain_up_to_near_ties(
        drafter: str, ours: Run, llama_plain: Run, prompts: list[list[int]], ggufs: Ggufs,
        tmp_path_factory: pytest.TempPathFactory,
        record_property: Callable[[str, object], None]) -> None:
    spec = llama_run(drafter, prompts, ggufs, tmp_path_factory)
    result = compare_runs(OURS, [ours, llama_plain, spec])[-1]
    print(f"\n{report([result])}")
    record_property(f"differential_{drafter}", json.dumps(result.to_dict()))
    drafted = sum(a.drafted for a in spec.answers)
    accepted = sum(a.accepted for a in spec.answers)
    assert result.run is spec and result.answers == N_PROMPTS
    assert drafted > 0 and 0 < accepted <= drafted
    assert not not_lossless_findings([result]), report([result])
    assert result.explained
