"""Every rollback strategy, after accepting j of k drafts, reaches the state that
processing the committed tokens one by one produces; `none` does not.

Digests: the exact digest wherever the two states came from the same arithmetic
(checkpoint restore + token-by-token replay against the one-by-one reference; per_token
against input_replay, which step the same recorded inputs through the same function).
Where a batched forward took part (verify over k+1 tokens, or a batched replay), the
projections run as a matrix product instead of a vector product and the last bits differ,
so those states are compared numerically (`diff`, relative to each tensor's peak). The
tolerant digest is not the oracle there: per-element rounding flips whenever one value sits
within the error of a rounding boundary; on these states we measured 1-2 flips in 200
comparisons at 2-5 bits and 1 in 40 at 6 bits, too many for a test that must not flake."""

from collections.abc import Callable

import pytest
import torch

from engine.backend import Keep
from engine.hybrid import HybridModel, HybridState
from tests.engine.hybrid.conftest import Pair

K = 4  # drafts per round; the verify batch is [t_last, d1..dK]
STATE_TOL = 1e-4
TOLERANT_BITS = 8


def _prefilled(model: HybridModel, seed: int) -> tuple[HybridState, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    state = model.new_state()
    model(torch.randint(0, 300, (1, 37), generator=gen), state)
    return state, torch.randint(0, 300, (1, K + 1), generator=gen)


def _one_by_one(model: HybridModel, state: HybridState, tokens: torch.Tensor) -> HybridState:
    for t in range(tokens.shape[1]):
        model(tokens[:, t:t + 1], state)
    return state


@pytest.mark.parametrize("name", ["gqa_tied_k4", "mha_untied_k2"])
@pytest.mark.parametrize("accepted", range(K))
def test_strategies_reach_the_one_by_one_state(pair: Callable[[str], Pair], name: str,
                                               accepted: int) -> None:
    model = pair(name).model
    base, batch = _prefilled(model, seed=accepted)
    committed = batch[:, :accepted + 1]
    reference = _one_by_one(model, base.copy(), committed)

    checkpoint = base.copy()
    snap = checkpoint.snapshot()
    model(batch, checkpoint)
    checkpoint.restore(snap)
    _one_by_one(model, checkpoint, committed)
    assert checkpoint.digest() == reference.digest()

    batched_replay = base.copy()
    snap = batched_replay.snapshot()
    model(batch, batched_replay)
    batched_replay.restore(snap)
    model(committed, batched_replay)

    per_token = base.copy()
    _, kept = model.verify(batch, per_token, Keep.PER_TOKEN)
    per_token.select(kept, accepted)

    input_replay = base.copy()
    _, recorded = model.verify(batch, input_replay, Keep.INPUTS)
    input_replay.replay_inputs(recorded, accepted + 1)
    assert per_token.digest() == input_replay.digest()

    for state in (batched_replay, per_token, input_replay):
        assert state.position == reference.position == base.position + accepted + 1
        assert state.diff(reference) <= STATE_TOL

    none = base.copy()
    model(batch, none)
    none.trim(base.position + accepted + 1)
    assert none.digest() != reference.digest()
    assert none.digest(TOLERANT_BITS) != reference.digest(TOLERANT_BITS)
    assert none.diff(reference) > 1e-2


def test_full_accept_needs_no_repair(pair: Callable[[str], Pair]) -> None:
    model = pair("gqa_tied_k4").model
    base, batch = _prefilled(model, seed=9)
    reference = _one_by_one(model, base.copy(), batch)
    per_token = base.copy()
    _, kept = model.verify(batch, per_token, Keep.PER_TOKEN)
    live = per_token.digest()
    per_token.select(kept, K)
    assert per_token.digest() == live
    plain = base.copy()
    model(batch, plain)
    assert plain.diff(reference) <= STATE_TOL


def test_verify_deferred_leaves_the_state_as_it_was(pair: Callable[[str], Pair]) -> None:
    model = pair("bias_grouped_k3").model
    base, batch = _prefilled(model, seed=10)
    before = base.digest()
    logits, recorded = model.verify(batch, base, Keep.INPUTS)
    assert base.digest() == before
    assert recorded.length == K + 1 and recorded.nbytes > 0
    plain = base.copy()
    torch.testing.assert_close(logits, model(batch, plain)[0])
