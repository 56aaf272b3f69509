"""HybridState operations on their own: snapshot/restore, trim, misuse errors, digests."""

from collections.abc import Callable

import pytest
import torch

from engine.backend import Keep
from engine.hybrid import HybridModel, HybridState, StateError
from fsm.errors import SpecledgerError
from tests.engine.hybrid.conftest import Pair


def _ids(length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 300, (1, length), generator=torch.Generator().manual_seed(seed))


@pytest.fixture
def model(pair: Callable[[str], Pair]) -> HybridModel:
    return pair("gqa_tied_k4").model


def test_snapshot_restore_round_trip_is_exact(model: HybridModel) -> None:
    state = model.new_state()
    model(_ids(20), state)
    before = state.digest()
    snap = state.snapshot()
    assert snap.nbytes == state.state_bytes > 0
    model(_ids(7, seed=1), state)
    assert state.digest() != before
    state.restore(snap)
    assert state.digest() == before


def test_restore_refuses_a_snapshot_whose_kv_was_rewritten(model: HybridModel) -> None:
    state = model.new_state()
    model(_ids(20), state)
    snap = state.snapshot()
    state.trim(15)
    state.restore(snap)  # trimming alone leaves the KV entries intact
    state.trim(15)
    model(_ids(3, seed=1), state)
    with pytest.raises(StateError, match="rewritten"):
        state.restore(snap)


def test_trim_cuts_kv_but_not_recurrent_state(model: HybridModel) -> None:
    state = model.new_state()
    model(_ids(10), state)
    recurrent = [t.clone() for t in state.recurrent]
    state.trim(6)
    assert state.position == 6
    assert all(torch.equal(a, b) for a, b in zip(recurrent, state.recurrent, strict=True))
    with pytest.raises(StateError):
        state.trim(7)


def test_select_and_replay_check_where_they_apply(model: HybridModel) -> None:
    state = model.new_state()
    model(_ids(10), state)
    _, kept = model.verify(_ids(3, seed=1), state, Keep.PER_TOKEN)
    with pytest.raises(StateError, match="out of range"):
        state.select(kept, 3)
    state.select(kept, 1)
    with pytest.raises(StateError, match="captured"):
        state.select(kept, 0)
    _, recorded = model.verify(_ids(3, seed=2), state, Keep.INPUTS)
    model(_ids(1, seed=3), state)
    with pytest.raises(StateError, match="recorded"):
        state.replay_inputs(recorded, 1)
    assert issubclass(StateError, SpecledgerError)


def test_kv_grows_past_its_initial_capacity(model: HybridModel) -> None:
    ids = _ids(150)
    state = model.new_state()
    model(ids[:, :100], state)
    stepped = torch.cat([model(ids[:, t:t + 1], state) for t in range(100, 150)], dim=1)
    torch.testing.assert_close(stepped, model(ids)[:, 100:], rtol=0, atol=2e-4)


def test_digest_covers_position_kv_and_recurrent_state(model: HybridModel) -> None:
    state = model.new_state()
    model(_ids(12), state)
    twin = state.copy()
    assert twin.digest() == state.digest()
    twin.trim(11)
    assert twin.digest() != state.digest()
    twin = state.copy()
    with torch.inference_mode():  # state tensors are inference tensors
        twin.keys[0][0, 0, 3, 0] += 1.0
    assert twin.digest() != state.digest()
    twin = state.copy()
    with torch.inference_mode():
        twin.recurrent[0].mul_(1.5)
    assert twin.digest() != state.digest() and twin.digest(8) != state.digest(8)


def test_tolerant_digest_ignores_sub_grid_changes(model: HybridModel) -> None:
    state = model.new_state()
    model(_ids(12), state)
    bits = 10
    nudged = state.copy()
    # Move every value a little towards its nearest grid point: below the rounding
    # resolution and never across a boundary, so only the exact digest may change.
    with torch.inference_mode():
        for t in nudged.tensors():
            scale = 2.0 ** (bits - int(torch.frexp(t.abs().max())[1]))
            t.copy_(t + (torch.round(t * scale) / scale - t) * 0.01)
    assert nudged.digest() != state.digest()
    assert nudged.digest(bits) == state.digest(bits)
    assert nudged.diff(state) < 1e-3
    with pytest.raises(StateError):
        state.digest(0)


def test_reset_and_copy_are_independent(model: HybridModel) -> None:
    state = model.new_state()
    empty = state.digest()
    model(_ids(5), state)
    twin = state.copy()
    state.reset()
    assert state.position == 0 and state.digest() == empty
    assert twin.position == 5


def test_state_must_match_model_and_batch(pair: Callable[[str], Pair],
                                          model: HybridModel) -> None:
    other = pair("mha_untied_k2").model
    with pytest.raises(StateError):
        model(_ids(3), other.new_state())
    with pytest.raises(StateError):
        model(_ids(3), HybridState(model.config, batch_size=2))
