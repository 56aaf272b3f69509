"""One packed forward over several slots' verify batches (`verify_batch`) gives every row
what its own `verify` gives: the same targets, and after the row's commit (select, replay of the
recorded inputs, restore of a snapshot and replay, trim) the same state; rows differ in
length (1..9), position (0 included) and strategy. The batch shape changes the rounding of
the projections, hence `diff` (relative to each tensor's peak) instead of digests."""

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.backend import Keep, VerifyOut
from engine.config import RunConfig, Strategy
from engine.errors import BackendError
from engine.hybrid import HybridError, HybridModel, HybridState, StateError
from engine.hybrid.backend import TorchBackend
from engine.hybrid.loader import LoadedCheckpoint, load_checkpoint
from engine.sampling import greedy_targets
from engine.shipped import model_dir
from tests.engine.hybrid.conftest import Pair

STATE_TOL = 1e-5
LOGIT_TOL = 1e-4  # relative to the logits' peak
VOCAB = 300
P, R, C, N = (Strategy.PER_TOKEN, Strategy.INPUT_REPLAY, Strategy.CHECKPOINT,
              Strategy.NONE)
KEEP = {P: Keep.PER_TOKEN, R: Keep.INPUTS, C: Keep.NOTHING, N: Keep.NOTHING}


@dataclass(frozen=True)
class Row:
    """One slot of a scheduler step: its position, its verify batch's length, strategy."""

    position: int
    length: int
    strategy: Strategy


def _ragged(strategy: Strategy) -> list[Row]:
    """Lengths 1..9 at different positions, with plain-decoding rows among them; one row
    outgrows the KV capacity it had (64 positions)."""
    return [Row(7, 9, strategy), Row(0, 3, strategy), Row(13, 1, N), Row(2, 5, strategy),
            Row(21, 1, N), Row(4, 1, strategy), Row(9, 2, strategy), Row(58, 8, strategy)]


def _setup(prefill: Callable[[HybridState, list[int]], object], new: Callable[[], HybridState],
           rows: Sequence[Row], seed: int) -> tuple[list[HybridState], list[list[int]]]:
    gen = torch.Generator().manual_seed(seed)
    states, batches = [], []
    for row in rows:
        state = new()
        if row.position:
            prefill(state, torch.randint(0, 256, (row.position,), generator=gen).tolist())
        states.append(state)
        batches.append(torch.randint(0, 256, (row.length,), generator=gen).tolist())
    return states, batches


def _commit(model: HybridModel, state: HybridState, batch: list[int], strategy: Strategy,
            kept: object, snap: object, accepted: int) -> None:
    """What the round does at an accept of `accepted` drafts."""
    keep = accepted + 1
    if strategy is P:
        state.select(kept, accepted)
    elif strategy is R:
        state.replay_inputs(kept, keep)
    elif strategy is C and keep < len(batch):
        state.restore(snap)
        model(torch.tensor([batch[:keep]]), state)
    elif strategy is N:
        state.trim(state.position - len(batch) + keep)


def _compare(model: HybridModel, rows: Sequence[Row], seed: int) -> None:
    def prefill(state: HybridState, tokens: list[int]) -> None:
        model(torch.tensor([tokens]), state)

    base, batches = _setup(prefill, model.new_state, rows, seed)
    strategies = [row.strategy for row in rows]
    alone, together = [s.copy() for s in base], [s.copy() for s in base]
    snaps = [(a.snapshot(), b.snapshot()) for a, b in zip(alone, together, strict=True)]
    keeps = [KEEP[s] for s in strategies]
    expected = [model.verify(torch.tensor([b]), s, k) for s, b, k in
                zip(alone, batches, keeps, strict=True)]
    logits, kept = model.verify_rows(batches, together, keeps)
    assert logits.shape[0] == sum(r.length for r in rows)  # packed: no padding
    pick = random.Random(seed)
    end = 0
    for i, (row, batch) in enumerate(zip(rows, batches, strict=True)):
        begin, end = end, end + row.length
        want, got = expected[i][0], logits[begin:end]
        assert greedy_targets(got) == greedy_targets(want)
        assert (got - want).abs().max() <= LOGIT_TOL * want.abs().max()
        assert together[i].position == alone[i].position
        assert together[i].diff(alone[i]) <= STATE_TOL
        accepted = pick.randrange(row.length)
        _commit(model, alone[i], batch, row.strategy, expected[i][1], snaps[i][0], accepted)
        _commit(model, together[i], batch, row.strategy, kept[i], snaps[i][1], accepted)
        assert together[i].position == alone[i].position == row.position + accepted + 1
        assert together[i].diff(alone[i]) <= STATE_TOL


@pytest.mark.parametrize("name", ["gqa_tied_k4", "mha_untied_k2"])
@pytest.mark.parametrize("strategy", [P, R, C, N])
def test_each_row_gets_what_its_own_verify_gives(pair: Callable[[str], Pair], name: str,
                                                 strategy: Strategy) -> None:
    _compare(pair(name).model, _ragged(strategy), seed=list(Strategy).index(strategy))


def test_rows_of_different_strategies_share_one_forward(pair: Callable[[str], Pair]) -> None:
    rows = [Row(5, 4, P), Row(11, 6, R), Row(3, 1, N), Row(8, 9, C), Row(0, 2, N),
            Row(17, 3, R), Row(6, 1, P)]
    _compare(pair("bias_grouped_k3").model, rows, seed=7)


def test_a_step_of_single_tokens(pair: Callable[[str], Pair]) -> None:
    """Every row decodes one token (the recurrent form, no padding)."""
    rows = [Row(4, 1, N), Row(9, 1, P), Row(1, 1, R), Row(0, 1, C)]
    _compare(pair("gqa_tied_k4").model, rows, seed=3)


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.builds(Row, st.integers(0, 70), st.integers(1, 9),
                               st.sampled_from([P, R, C, N])), min_size=1, max_size=4),
       name=st.sampled_from(["gqa_tied_k4", "mha_untied_k2"]))
def test_any_ragged_step(pair: Callable[[str], Pair], rows: list[Row], name: str) -> None:
    _compare(pair(name).model, rows, seed=len(rows))


def test_malformed_rows_are_refused(pair: Callable[[str], Pair]) -> None:
    model = pair("gqa_tied_k4").model
    state = model.new_state()
    nothing = Keep.NOTHING
    with pytest.raises(HybridError, match="one batch and one keep per state"):
        model.verify_rows([[1], [2]], [state], [nothing])
    with pytest.raises(HybridError, match="empty batch"):
        model.verify_rows([[]], [state], [nothing])
    with pytest.raises(StateError, match="appears in two rows"):
        model.verify_rows([[1], [2]], [state, state], [nothing, nothing])
    with pytest.raises(StateError, match="batch-size-1"):
        model.verify_rows([[1, 2]], [model.new_state(batch_size=2)], [nothing])
    assert state.position == 0


@pytest.fixture(scope="module")
def shipped() -> LoadedCheckpoint:
    return load_checkpoint(model_dir("shipped:target"))


def _backend(ckpt: LoadedCheckpoint, **kw: object) -> TorchBackend:
    return TorchBackend(RunConfig(backend="torch", model="shipped:target", **kw), ckpt)


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_backend_rows_match_sequential_verifies(shipped: LoadedCheckpoint,
                                                temperature: float) -> None:
    """Targets (sampled ones drawn in row order), states and the hidden states the MTP
    drafter reads."""
    alone, together = (_backend(shipped, temperature=temperature, seed=5) for _ in range(2))
    assert together.capabilities.verify_batch is not None
    rows = [Row(6, 5, P), Row(12, 1, N), Row(3, 8, R), Row(9, 3, C), Row(1, 1, N)]
    # The same prompts through each backend (each files its own hidden-state history; the
    # prefills draw alike from the two equally seeded generators).
    mine, batches = _setup(alone.prefill, alone.new_state, rows, seed=11)
    theirs, _ = _setup(together.prefill, together.new_state, rows, seed=11)
    keeps = [KEEP[row.strategy] for row in rows]
    expected: list[VerifyOut] = [alone.verify(s, b, k) for s, b, k in
                                 zip(mine, batches, keeps, strict=True)]
    got = together.verify_batch(theirs, batches, keeps)
    for row, want, out, a, b in zip(rows, expected, got, mine, theirs, strict=True):
        assert out.targets == want.targets
        if row.strategy is P:
            a.select(want.kept, 0)
            b.select(out.kept, 0)
        elif row.strategy is R:
            a.replay_inputs(want.kept, row.length)
            b.replay_inputs(out.kept, row.length)
        assert b.diff(a) <= STATE_TOL
        hidden_a = alone.hidden_states(a, 0, a.position)
        hidden_b = together.hidden_states(b, 0, b.position)
        assert (hidden_b - hidden_a).abs().max() <= STATE_TOL * hidden_a.abs().max()


def test_backend_refuses_mismatched_rows(shipped: LoadedCheckpoint) -> None:
    backend = _backend(shipped)
    with pytest.raises(BackendError, match="one batch and one keep per state"):
        backend.verify_batch([backend.new_state()], [[1], [2]], [Keep.NOTHING] * 2)
    assert backend.verify_batch([], [], []) == []
