"""Prefill in two pieces, split anywhere, reaches the one-shot prefill's logits and state."""

from collections.abc import Callable

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.hybrid.conftest import SELF_TOL, Pair

LENGTH = 80  # crosses the 64-token chunk boundary


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(split=st.integers(min_value=1, max_value=LENGTH - 1),
       name=st.sampled_from(["gqa_tied_k4", "bias_grouped_k3"]))
def test_split_prefill_equals_one_shot(pair: Callable[[str], Pair], split: int,
                                       name: str) -> None:
    model = pair(name).model
    ids = torch.randint(0, 300, (1, LENGTH), generator=torch.Generator().manual_seed(4))
    whole = model.new_state()
    expected = model(ids, whole)
    parts = model.new_state()
    got = torch.cat([model(ids[:, :split], parts), model(ids[:, split:], parts)], dim=1)
    assert parts.position == whole.position == LENGTH
    assert (got - expected).abs().max() <= SELF_TOL * expected.abs().max()
    assert parts.diff(whole) <= 1e-4
