"""vLLM's server on its own, as the engine comparison uses it (skipped without vLLM,
failed under SPECLEDGER_REQUIRE_VLLM=1): greedy completions over token ids with the top-2
candidates by id, the counters around one request, the prefix cache of plain decoding, a
server killed mid-run (one line), and vLLM's own failure on a Qwen3.5 draft model. (A
model vLLM's kernels refuse: tests/specledger/runs/test_vllm.py.)"""

import os
import signal
from pathlib import Path

import pytest

from adapters.vllm.errors import ModelRefusedError, ServerDiedError
from adapters.vllm.metrics import parse_counters
from adapters.vllm.options import Method, VllmOptions
from adapters.vllm.server import VllmServer
from engine.hybrid.tokenizer import chat_template, encode
from engine.shipped import model_dir
from tests.adapters.vllm.conftest import DRAFT, TARGET, require_vllm

pytestmark = pytest.mark.vllm  # make test-vllm runs them


def prompt(question: str) -> list[int]:
    """A one-turn ChatML prompt in the shipped tokenizer's ids."""
    t = chat_template()
    return [*t.user_turn(encode(question)), *t.header]


def test_greedy_completions_name_the_top_two_by_id(plain_server: VllmServer) -> None:
    done = plain_server.client.complete_all([prompt("def add(a, b):"), prompt("x = ")], 16)
    for c in done:
        assert 0 < len(c.tokens) <= 16 and len(c.top) == len(c.tokens)
        # Greedy: the token taken is the likeliest, and the runner-up is named by id.
        assert all(len(top) == 2 and top[0][0] == tok and top[0][1] >= top[1][1]
                   for tok, top in zip(c.tokens, c.top, strict=True))
        assert c.finish_reason in ("stop", "length")


def test_the_counters_around_a_request_are_its_own(plain_server: VllmServer) -> None:
    ids = prompt("import os")
    before = parse_counters(plain_server.client.metrics())
    c = plain_server.client.complete(ids, 8)
    d = parse_counters(plain_server.client.metrics()) - before
    assert (d.prompt_tokens, d.generation_tokens) == (len(ids), len(c.tokens))
    assert c.prompt_tokens == len(ids) and d.drafts is None  # a plain server drafts nothing


def test_plain_decoding_keeps_its_prefix_cache(plain_server: VllmServer) -> None:
    ids = prompt("a" * 900)
    block = plain_server.block_size()
    assert block is not None and block >= 256
    hits = 0
    # vLLM's 'align' cache keeps a block's GDN state once a later request of the prefix has
    # run past it (on some CPUs the second request, on others the third): up to three.
    for extra in ([], [10], [10, 11], [10, 11, 12]):
        before = parse_counters(plain_server.client.metrics())
        plain_server.client.complete([*ids, *extra], 4)
        hits = (parse_counters(plain_server.client.metrics()) - before).prefix_hits
        if hits:
            break
    # A hybrid model's cache holds whole blocks with their GDN state.
    assert hits >= block and hits % block == 0


def test_a_server_killed_mid_run_is_one_line(plain_server: VllmServer) -> None:
    os.killpg(plain_server.pid, signal.SIGKILL)
    with pytest.raises(ServerDiedError) as raised:
        plain_server.client.complete(prompt("x"), 4)
    message = str(raised.value)
    assert "\n" not in message and "killed by signal 9 mid-run" in message


def test_vllm_turns_a_qwen35_draft_model_into_an_mtp_head(tmp_path: Path) -> None:
    """Why `run --backend vllm --drafter draft-model` is refused (options.CANNOT_RUN): vLLM
    itself fails on the shipped draft model, at startup."""
    require_vllm()
    opts = VllmOptions(model=model_dir(TARGET), method=Method.DRAFT_MODEL,
                       draft_model=model_dir(DRAFT))
    with pytest.raises(ModelRefusedError, match="integer modulo by zero"):
        VllmServer(opts, tmp_path / "d.log").start()
