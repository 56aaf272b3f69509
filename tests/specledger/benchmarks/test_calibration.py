"""The calibration suite: the fit recovers a known cost model from noisy timings, the
sim replays a recorded run round by round, and a quick run writes its profile into its
own folder, never over the shipped one, and reports no goal."""

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from engine.config import RunConfig
from engine.session import MemoryJournal, Session
from engine.sim.costs import PROFILE_DIR, CostProfile, get_profile
from eventlog import get_session, open_db
from fsm.states import Trigger
from specledger.benchmarks import BenchOptions, run_suite
from specledger.benchmarks.calibration import (
    FITTED,
    PROFILE_NAME,
    Grid,
    Point,
    TorchRun,
    fit,
    fit_errors,
    points_of,
    predict,
    round_script,
    sim_replay,
)

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


@pytest.mark.parametrize(("answer", "cap"), [(120, 128), (300, 128)])
def test_the_sim_replays_a_recorded_run_round_by_round(answer: int, cap: int) -> None:
    """A run's rounds (drafts and accepted counts) read back from its events and replayed
    on the sim: the same rounds, tokens and acceptance, whether the answer ended or hit
    the cap."""
    config = RunConfig(drafter="synthetic", acceptance=0.6, draft_max=8, turns=1,
                       prompt_tokens=200, answer_tokens=answer, max_answer_tokens=cap,
                       audit=False, profile="tiny-cpu")
    journal = MemoryJournal()
    t = Session(config, journal).run()[0]
    script, draft_s = round_script(journal.events)
    drafting = [e for e in journal.events if e.trigger is Trigger.DRAFT]
    assert len(script) == len(drafting) and sum(a for _, a in script) == t.accepted
    run = TorchRun(0, t.prompt_tokens, t.generated_tokens, t.rounds, t.decode_s, draft_s,
                   script)
    sim = sim_replay(run, config, get_profile("tiny-cpu"))
    assert (sim["prompt_tokens"], sim["generated"], sim["rounds"], sim["drafted"],
            sim["accepted"]) == (t.prompt_tokens, t.generated_tokens, t.rounds, t.drafted,
                                 t.accepted)
    # The same operations under the same profile: the same decode time.
    assert sim["decode_s"] == pytest.approx(t.decode_s, rel=1e-9)


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
    validation = doc["calibration"]["validation"]
    assert [v["drafter"] for v in validation] == ["none", "mtp"]
    for v in validation:  # a torch run after each kept pass, replayed round by round
        assert len(v["sessions"]) == 2
        assert v["sim"]["rounds"] == v["torch"]["rounds"]
        assert v["sim"]["generated"] == v["torch"]["generated"]
    # No goal: the goals table has no calibration line; the errors are in the table.
    assert result.goals == [] and doc["goals"] == []
    assert "validation error" in (folder / "results.md").read_text()
    engine = open_db(opts.db, create=False)
    backends = [get_session(engine, sid).backend for sid in result.sessions]
    assert backends == ["torch"] * 4
    engine.dispose()
