"""The sampler check's comparison: a parameter differs when it differs by more than the
log's rounding (3 decimals), by however little more; the filters that act and their order
are compared where they matter."""

import pytest

from eventlog.postmortem.sampler import TOLERANCE, differences


@pytest.mark.parametrize("claimed,used,differ", [
    (0.8, 0.8, False), (0.8, 0.8004, False), (0.8, 0.801, True), (0.8, 0.7, True),
    (0.8, 0.8 + TOLERANCE, False), (0.8, 0.8 + 2 * TOLERANCE, True)])
def test_a_parameter_differs_beyond_the_log_s_rounding(claimed: float, used: float,
                                                        differ: bool) -> None:
    rows = differences({"temperature": claimed}, {"temperature": used})
    assert rows == ([{"what": "temperature", "claimed": claimed, "used": used}] if differ
                    else [])


def test_other_samplers_and_their_order() -> None:
    claim = {"temperature": 0.7, "top_k": 40, "order": ["top_k", "temperature"]}
    assert differences(claim, {**claim, "others": ["xtc"]}) == [
        {"what": "others", "claimed": [], "used": ["xtc"]}]
    swapped = {**claim, "order": ["temperature", "top_k"]}
    assert [r["what"] for r in differences(claim, swapped)] == ["order"]
    # At temperature 0 the draw is the argmax: the order cannot change it.
    greedy = {**claim, "temperature": 0.0}
    assert differences(greedy, {**swapped, "temperature": 0.0}) == []
