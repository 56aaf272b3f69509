"""The calibration's cost-model fit: it recovers a known cost model from exact and from
noisy timings over a measurement grid."""

import random
from dataclasses import replace

import pytest

from engine.sim.costs import CostProfile
from specbench.calibration.fit import FITTED, Point, fit, fit_errors, predict
from specbench.calibration.measure import Grid, points_of

# Sizes of the shipped model; rates chosen so every term of the model shows in the grid:
# a one-token forward cheaper than two, a cost per token, compute binding in the longer
# prefill chunks (not in verifies), a visible KV read at long contexts, state traffic
# beside the per-position step of replays and per-token captures.
TRUTH = CostProfile(
    name="truth", weight_bytes=7.0e6, hbm_bw=2.0e9, flops_per_token=3.5e6, peak_flops=6e10,
    kv_bytes_per_token=1024, state_bytes=116_736, copy_bw=2.5e9, launch_s=1.0e-3,
    description="synthetic ground truth", token_s=1.5e-4, multi_token_s=2.0e-3,
    state_step_s=1.0e-4, recurrence_launch_s=1.5e-4,
)
GRID = Grid(batches=(1, 2, 3, 5, 9, 13, 17), contexts=(0, 512, 2048),
            prefills=(64, 256, 512, 2048), repeat=1, answer_tokens=1)


def _timings(seed: int | None) -> list[Point]:
    """The grid's times under TRUTH, with 3% log-normal noise unless `seed` is None."""
    rng = random.Random(seed)
    noise = 0.0 if seed is None else 0.03
    return [Point(op, b, c, predict(TRUTH, op, b, c) * rng.lognormvariate(0, noise))
            for op, b, c in points_of(GRID)]


def test_fit_recovers_every_constant_of_a_known_profile() -> None:
    # Far from the truth to start with: every term must be determined by the timings.
    fitted = fit(_timings(None), replace(TRUTH, **{n: 1.0 for n in FITTED}))
    for name in FITTED:
        assert getattr(fitted, name) == pytest.approx(getattr(TRUTH, name), rel=1e-3), name
    # The sizes are physical: the fit never touches them.
    assert replace(fitted, **{n: getattr(TRUTH, n) for n in FITTED}) == TRUTH


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_recovers_a_known_profile_from_noisy_timings(seed: int) -> None:
    points = _timings(seed)
    fitted = fit(points, replace(TRUTH, **{n: 1.0 for n in FITTED}))
    # Every operation is predicted within the noise...
    for p in points:
        truth = predict(TRUTH, p.op, p.batch, p.ctx)
        assert predict(fitted, p.op, p.batch, p.ctx) == pytest.approx(truth, rel=0.05), p
    for op, err in fit_errors(points, fitted).items():
        assert err["rel_rms"] < 0.06, op
    # ...and the terms the timings pin down are the truth's. (A fixed cost per forward
    # splits between `launch_s` and the weight read only as well as the KV read and the
    # state traffic fix the bandwidth: with 3% noise, loosely.)
    assert fitted.forward_s(1, 0) == pytest.approx(TRUTH.forward_s(1, 0), rel=0.05)
    for name in ("multi_token_s", "copy_bw", "token_s", "recurrence_launch_s"):
        assert getattr(fitted, name) == pytest.approx(getattr(TRUTH, name), rel=0.15), name
    assert replace(fitted, **{n: getattr(TRUTH, n) for n in FITTED}) == TRUTH


def test_the_fit_tells_a_one_token_forward_from_a_longer_one() -> None:
    """The measured shape the cost model exists for: one token takes the recurrent step
    (cheap), two or more the chunked form (a fixed cost more), then a cost per token."""
    points = [Point("verify_live", b, 0, (4.5e-3 if b == 1 else 6.0e-3 + 1.7e-4 * b))
              for b in range(1, 18)]
    fitted = fit(points, replace(TRUTH, kv_bytes_per_token=0.0))
    for p in points:
        assert predict(fitted, p.op, p.batch, p.ctx) == pytest.approx(p.seconds, rel=0.02)
