"""Our model against transformers' Qwen3_5ForCausalLM on the same saved weights (random
ones, and shipped:wide, the model three engines run, in float32 and bfloat16), and our
decode path against our own full-sequence forward."""

from collections.abc import Callable

import pytest
import torch
from transformers import Qwen3_5ForCausalLM

from engine.hybrid import load_checkpoint
from engine.hybrid.tokenizer import encode
from engine.shipped import model_dir
from tests.engine.hybrid.conftest import CONFIGS, SELF_TOL, Pair

WIDE = "shipped:wide"
# A chat turn as the models were trained on, longer than two of the GDN's 64-token chunks.
PROMPT = ("<|im_start|>user\nComplete this function:\n\ndef merge(left, right):\n"
          "    \"\"\"Merge two sorted lists into one sorted list.\"\"\"<|im_end|>\n"
          "<|im_start|>assistant\n    out = []\n    i = j = 0\n    while i < len(left) and "
          "j < len(right):\n")


@pytest.mark.parametrize("name", CONFIGS)
def test_full_sequence_logits_match_transformers(pair: Callable[[str], Pair], name: str) -> None:
    p = pair(name)
    # 150 tokens: two full 64-token chunks and a padded third.
    ids = torch.randint(0, 300, (2, 150), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = p.reference(ids).logits
    got = p.model(ids)
    assert got.shape == expected.shape
    assert (got - expected).abs().max() <= 1e-4 * expected.abs().max()


@pytest.mark.parametrize("name", CONFIGS)
def test_token_by_token_decode_matches_full_forward(pair: Callable[[str], Pair],
                                                    name: str) -> None:
    model = pair(name).model
    ids = torch.randint(0, 300, (1, 24), generator=torch.Generator().manual_seed(2))
    full = model(ids)
    state = model.new_state()
    steps = torch.cat([model(ids[:, t:t + 1], state) for t in range(ids.shape[1])], dim=1)
    assert state.position == ids.shape[1]
    assert (steps - full).abs().max() <= SELF_TOL * full.abs().max()


def test_last_only_returns_the_last_row(pair: Callable[[str], Pair]) -> None:
    model = pair("gqa_tied_k4").model
    ids = torch.randint(0, 300, (1, 10), generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(model(ids, last_only=True), model(ids)[:, -1:])


# bfloat16 keeps 8 significant bits, and the two implementations round weights and
# activations at different places (ours keeps the GDN math and norms in float32 as HF
# does, but not every cast lines up), so their logits agree to a few bf16 steps of the
# logit range: measured 0.125 of 18.9 (0.7%, one bf16 step at that size) on this prompt
# (float32: 9.5e-6), bounded by BF16_TOL (2%).
BF16_TOL = 0.02


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float32, 1e-4),
                                                  (torch.bfloat16, BF16_TOL)])
def test_shipped_wide_matches_transformers(dtype: torch.dtype, tolerance: float) -> None:
    reference = Qwen3_5ForCausalLM.from_pretrained(model_dir(WIDE), dtype=dtype).eval()
    ours = load_checkpoint(WIDE, dtype=dtype).model
    assert ours.dtype == dtype
    ids = torch.tensor([encode(PROMPT)])
    assert ids.shape[1] > 128
    with torch.no_grad():
        expected = reference(ids).logits.float()
        got = ours(ids).float()
    assert (got - expected).abs().max() <= tolerance * expected.abs().max()
