"""The public-hardware profiles: every fitted term reproduces from the published numbers
cited in engine/sim/published.py, and the predictions of the numbers not fitted on keep
the sign and size of what users measured."""

import pytest

from engine.sim.costs import get_profile
from engine.sim.forecast import MTP_DRAFT_SHARE, Mode, expected_rounds, forecast
from engine.sim.published import EVIDENCE, Kind, error, fitted, predict

MEASURED = [n for n, e in EVIDENCE.items() if e.transfer is None]


@pytest.mark.parametrize("name", sorted(EVIDENCE))
def test_stored_profiles_are_the_fit_of_their_cited_numbers(name: str) -> None:
    stored, e = get_profile(name), EVIDENCE[name]
    assert stored == fitted(name)
    assert stored.host_copy_s == stored.round_sync_s == 0.0
    assert stored.state_tensors > 0 and stored.tensor_copy_s > 0
    for m in (*e.fit, *e.validation):
        assert m.source in stored.description
    assert ("Expected error" in stored.description) == (e.transfer is None)


@pytest.mark.parametrize("name", MEASURED)
def test_fit_and_validation_are_disjoint_and_the_fit_is_exact(name: str) -> None:
    e, p = EVIDENCE[name], get_profile(name)
    assert e.validation and not set(e.fit) & set(e.validation)
    assert all(abs(error(p, m)) < 1e-6 for m in e.fit)


@pytest.mark.parametrize("name", MEASURED)
def test_held_out_predictions_keep_sign_and_size(name: str) -> None:
    p = get_profile(name)
    for m in EVIDENCE[name].validation:
        assert abs(error(p, m)) < 0.20, m.label()
        if m.kind is Kind.SPEEDUP:  # slower or faster than the other way, as measured
            assert (m.value < 1) == (predict(p, m) < 1)


def test_strix_halo_host_checkpoints_lose_to_plain_and_on_device_ones_win() -> None:
    """PR #28118/#28120: host checkpoints run MTP at 0.19x of plain on Strix Halo."""
    rounds, weights = expected_rounds(3, 0.8, 512)
    f = forecast(get_profile("strix-halo-qwen3-next-80b-q4-llama"), rounds, MTP_DRAFT_SHARE,
                 weights)
    assert f.speedup(Mode.HOST) < 0.3 < 1.0 < f.speedup(Mode.DEVICE) < f.speedup(Mode.ROLLBACK)
