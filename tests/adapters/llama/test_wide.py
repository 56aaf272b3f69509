"""The wide models in llama.cpp: shipped:wide (with its MTP head) and shipped:wide-draft,
the pair vLLM's CPU kernels also run, export to GGUF files the default llama-server loads,
and it answers held-out prompts greedily with the tokens our engine answers in float32,
plain and with each model drafter (a divergence must be a near-tie, as in
test_differential.py)."""

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from adapters.answers import held_out_prompts, llama_answers, our_answer
from adapters.differential import Run, compare_runs, report
from adapters.llama.gguf.export import export_gguf
from adapters.llama.server.options import ServerOptions, parse_drafters
from adapters.llama.server.paths import require_converter
from adapters.llama.server.process import LlamaServer
from engine.config import DType
from engine.shipped import model_dir
from tests.adapters.llama.conftest import Ggufs, require_llama
from tests.adapters.llama.gguf.test_export import read_gguf

WIDE, WIDE_DRAFT = "shipped:wide", "shipped:wide-draft"
N_PROMPTS = 6
CAP = 64
OURS, LLAMA = "ours", "llama.cpp"


@pytest.fixture(scope="module")
def wide_ggufs(llama_server_binary: Any, tmp_path_factory: pytest.TempPathFactory) -> Ggufs:
    """The wide target (with its MTP head) and wide draft as f32 GGUF files."""
    require_llama(require_converter)
    folder = tmp_path_factory.mktemp("wide-gguf")
    with ThreadPoolExecutor(2) as pool:
        target = pool.submit(export_gguf, WIDE, folder / "wide.gguf")
        draft = pool.submit(export_gguf, WIDE_DRAFT, folder / "wide-draft.gguf")
        return Ggufs(target.result(), draft.result())


@pytest.fixture(scope="module")
def prompts_and_ours() -> tuple[list[list[int]], Run]:
    """The first held-out prompts and our float32 greedy answers to them."""
    from engine.hybrid.loader import load_checkpoint

    checkpoint = load_checkpoint(WIDE)
    prompts = held_out_prompts(checkpoint, N_PROMPTS)
    answers = tuple(our_answer(checkpoint.model, p, CAP) for p in prompts)
    return prompts, Run(OURS, "none", DType.FLOAT32, answers)


def test_wide_gguf_keeps_the_head_widths(wide_ggufs: Ggufs) -> None:
    config = json.loads((model_dir(WIDE) / "config.json").read_text())
    for path in (wide_ggufs.target, wide_ggufs.draft):
        meta, _ = read_gguf(path)
        assert meta["qwen35.attention.key_length"] == meta["qwen35.attention.value_length"] == 64
        assert meta["qwen35.ssm.state_size"] == 128
        assert meta["qwen35.rope.dimension_count"] == 16
    meta, tensors = read_gguf(wide_ggufs.target)
    layers = config["num_hidden_layers"]
    assert meta["qwen35.nextn_predict_layers"] == 1
    assert any(t.startswith(f"blk.{layers}.nextn.") for t in tensors)


@pytest.mark.parametrize("drafter", ["none", "mtp", "draft-model"])
def test_wide_answers_equal_ours_up_to_near_ties(
        drafter: str, prompts_and_ours: tuple[list[list[int]], Run], wide_ggufs: Ggufs,
        tmp_path_factory: pytest.TempPathFactory,
        record_property: Callable[[str, object], None]) -> None:
    prompts, ours = prompts_and_ours
    opts = ServerOptions(model=wide_ggufs.target, drafters=parse_drafters(drafter),
                         draft_model=wide_ggufs.draft, verbose=False)
    log = tmp_path_factory.mktemp("wide") / f"{drafter}.log"
    with LlamaServer(opts, log) as server:
        run = Run(LLAMA, drafter, DType.FLOAT32, llama_answers(server.client, prompts, CAP))
    # Each answer against ours: llama.cpp's plain one, and a speculative one as if it were
    # plain (greedy speculation is lossless, so it must meet ours too).
    (result,) = compare_runs(OURS, [ours, Run(LLAMA, "none", run.dtype, run.answers)])
    print(f"\n{report([result])}")
    record_property(f"wide_{drafter}", json.dumps(result.to_dict()))
    assert sum(len(a.tokens) for a in ours.answers) > 20 * N_PROMPTS  # real answers
    if drafter != "none":
        drafted = sum(a.drafted for a in run.answers)
        assert drafted > 0 and 0 < sum(a.accepted for a in run.answers) <= drafted
    assert result.explained, f"a divergence is no near-tie:\n{report([result])}"
