"""Our model against transformers' Qwen3_5ForCausalLM on the same saved weights, and our
decode path against our own full-sequence forward."""

from collections.abc import Callable

import pytest
import torch

from tests.engine.hybrid.conftest import CONFIGS, SELF_TOL, Pair


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
