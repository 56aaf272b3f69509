"""The calibration suite: the fit recovers a known cost model from noisy timings, and a
quick run writes its profile into its own folder, never over the shipped one."""

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from engine.sim.costs import PROFILE_DIR, CostProfile, get_profile
from eventlog import get_session, open_db
from specledger.benchmarks import BenchOptions, run_suite
from specledger.benchmarks.calibration import (
    FITTED,
    PROFILE_NAME,
    Grid,
    Point,
    fit,
    fit_errors,
    points_of,
    predict,
    synthetic_acceptance,
)

# Sizes of the shipped model; rates chosen so every term of the model shows in the grid:
# memory-bound small verifies, compute-bound prefill, a visible KV read at long contexts.
TRUTH = CostProfile(
    name="truth", weight_bytes=7.0e6, hbm_bw=4.0e9, flops_per_token=3.5e6, peak_flops=1.2e10,
    kv_bytes_per_token=1024, state_bytes=116_736, copy_bw=2.5e9, launch_s=1.5e-3,
    description="synthetic ground truth",
)
GRID = Grid(batches=(1, 2, 3, 5, 9, 13, 17), contexts=(0, 512, 2048),
            prefills=(64, 256, 512, 2048), repeat=1, answer_tokens=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_recovers_a_known_profile_from_noisy_timings(seed: int) -> None:
    rng = random.Random(seed)
    points = [Point(op, b, c, predict(TRUTH, op, b, c) * rng.lognormvariate(0, 0.03))
              for op, b, c in points_of(GRID)]
    start = replace(TRUTH, launch_s=1e-2, hbm_bw=1e11, peak_flops=1e9, copy_bw=1e8)
    fitted = fit(points, start)
    for name in FITTED:
        assert getattr(fitted, name) == pytest.approx(getattr(TRUTH, name), rel=0.1), name
    for op, err in fit_errors(points, fitted).items():
        assert err["rel_rms"] < 0.06, op
    # The sizes are physical: the fit never touches them.
    assert replace(fitted, **{n: getattr(TRUTH, n) for n in FITTED}) == TRUTH


def test_synthetic_acceptance_inverts_the_expected_accepted_count() -> None:
    p = synthetic_acceptance(2.0, 8)
    assert sum(p**i for i in range(1, 9)) == pytest.approx(2.0, rel=1e-6)
    assert synthetic_acceptance(0.0, 4) == pytest.approx(0.0, abs=1e-9)


def test_quick_run_writes_its_profile_but_not_the_shipped_one(tmp_path: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in PROFILE_DIR.glob("*")} \
        if PROFILE_DIR.is_dir() else {}
    opts = BenchOptions(out=tmp_path, db=str(tmp_path / "bench.db"), quick=True)
    result = run_suite("calibration", opts)
    after = {p.name: p.stat().st_mtime_ns for p in PROFILE_DIR.glob("*")} \
        if PROFILE_DIR.is_dir() else {}
    assert after == before

    folder = tmp_path / "calibration"
    profile = get_profile(PROFILE_NAME, folder)
    stored = json.loads((folder / f"{PROFILE_NAME}.json").read_text())
    assert stored["calibration"]["quick"] is True
    assert stored["calibration"]["machine"]["device"] == "cpu"
    assert set(stored["calibration"]["fit_error"]) >= {"verify_live", "prefill", "restore"}
    for name in FITTED:
        assert getattr(profile, name) > 0
    assert profile.state_bytes > 0 and profile.kv_bytes_per_token > 0
    for path in ("results.json", "results.md", "forward_fit.png", "forward_fit.svg"):
        assert (folder / path).is_file(), path

    doc = json.loads((folder / "results.json").read_text())
    assert len(doc["calibration"]["validation"]) == 2
    engine = open_db(opts.db, create=False)
    backends = sorted(get_session(engine, sid).backend for sid in result.sessions)
    assert backends == ["sim", "sim", "torch", "torch"]
    engine.dispose()
