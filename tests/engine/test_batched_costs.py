"""The cost of one batched verify forward (`CostProfile.batch_verify_s`): one row costs
exactly what its own verify costs, and a batch reads the weights once, so it costs less
than its rows one at a time and no less than its largest row."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.backend import Keep
from engine.config import RunConfig
from engine.sim.backend import SimBackend
from engine.sim.costs import PROFILES, CostProfile

rows = st.lists(st.tuples(st.integers(1, 65), st.integers(0, 100_000)), min_size=1,
                max_size=8)
profiles = st.sampled_from(list(PROFILES.values()))


@given(profile=profiles, n=st.integers(1, 65), ctx=st.integers(0, 100_000))
def test_a_batch_of_one_costs_its_verify_to_the_bit(profile: CostProfile, n: int,
                                                     ctx: int) -> None:
    assert profile.batch_verify_s([(n, ctx)]) == profile.verify_s(n, ctx)


@given(profile=profiles, batch=rows)
def test_a_batch_costs_less_than_its_rows_alone(profile: CostProfile,
                                                batch: list[tuple[int, int]]) -> None:
    together = profile.batch_verify_s(batch)
    alone = [profile.verify_s(n, ctx) for n, ctx in batch]
    assert max(alone) <= together * (1 + 1e-12)
    if len(batch) > 1:
        assert together < sum(alone)


@settings(deadline=None)
@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=8),
       strategy=st.sampled_from(["checkpoint", "per_token", "input_replay", "none"]))
def test_the_sim_clock_advances_once_per_batched_forward(sizes: list[int],
                                                         strategy: str) -> None:
    config = RunConfig(backend="sim", strategy=strategy)
    b = SimBackend(config)
    states = [b.new_state() for _ in sizes]
    for i, st_ in enumerate(states):
        b.prefill(st_, [7 + i] * (10 + i))
    rows = [(n, st_.position) for n, st_ in zip(sizes, states, strict=True)]
    batches = [[3] * n for n in sizes]
    t = b.now()
    keep = {"per_token": Keep.PER_TOKEN, "input_replay": Keep.INPUTS}.get(strategy, Keep.NOTHING)
    outs = b.verify_batch(states, batches, [keep] * len(sizes))
    expected = b.costs.batch_verify_s(rows)
    if strategy == "per_token":
        expected += b.costs.intermediate_write_s(sum(sizes))
    assert b.now() - t == pytest.approx(expected, rel=1e-12)  # one advance, not one a row
    assert [len(o.targets) for o in outs] == sizes
