"""Suite `calibration`: fit the sim's cost model to the torch backend on this machine.

The backend's operations (verify in its three modes, snapshot / restore / select, input
replay, prefill) are timed on the shipped model over a grid of batch sizes and contexts.
The sizes in `CostProfile` are physical and computed from the model (weight bytes, FLOP
per token, KV bytes per token, state bytes); the rates are fitted: launch time, effective
bandwidth, effective FLOP rate and copy bandwidth. On a CPU they are effective numbers
(Python and operator overhead lands in the launch time), not the hardware's.

The fit is checked twice: its error per operation over the measured points, and a
prediction: the same short conversation on the torch backend and on the sim with the
fitted profile, compared by decode time per committed token. The profile is written as
JSON into the suite's folder, and into `engine/sim/profiles/` by a full (not quick) run,
where `--profile hybrid-tiny-cpu-measured` finds it.

The torch backend has no device selection (it builds its inputs on the CPU), so the
calibration runs on the CPU even where a GPU is present.
"""

from __future__ import annotations

import math
import os
import platform
import random
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.backend import Backend, VerifyMode
from engine.config import RunConfig
from engine.hybrid.config import FULL as FULL_ATTENTION
from engine.metrics import TurnMetrics
from engine.session import Session
from engine.sim.backend import UBATCH, SimBackend
from engine.sim.costs import PROFILE_DIR, CostProfile, save_profile
from eventlog import Recorder, create_session, iter_events, open_db
from fsm.states import Trigger
from specledger.api import code_version
from specledger.benchmarks.common import (
    BenchOptions,
    Goal,
    SuiteResult,
    md_table,
    new_figure,
    save_figure,
)

if TYPE_CHECKING:
    from engine.hybrid.backend import TorchBackend
    from engine.hybrid.state import HybridState

PROFILE_NAME = "hybrid-tiny-cpu-measured"
COMMAND = "specledger bench calibration"
FITTED = ("launch_s", "hbm_bw", "peak_flops", "copy_bw")
BYTE_TOKENS = 256  # byte ids: ordinary tokens of the shipped tokenizer, never specials


@dataclass(frozen=True)
class Grid:
    """What is measured: verify batches (k + 1) at each context, prefill lengths, input
    replays over each batch size, `repeat` samples per point, and the answer cap of the
    validation conversations."""

    batches: tuple[int, ...]
    contexts: tuple[int, ...]
    prefills: tuple[int, ...]
    repeat: int
    answer_tokens: int


FULL = Grid(batches=tuple(range(1, 18)), contexts=(0, 256, 512, 1024, 2048),
            prefills=(16, 64, 256, 512, 1024, 2048), repeat=7, answer_tokens=128)
QUICK = Grid(batches=(1, 4, 9), contexts=(0, 64), prefills=(16, 64), repeat=2,
             answer_tokens=16)


@dataclass(frozen=True)
class Point:
    """One measured operation: `batch` tokens (or positions) at context `ctx`."""

    op: str
    batch: int
    ctx: int
    seconds: float


# --- the model of each operation: what the sim backend charges for it -----------------


def _prefill_s(p: CostProfile, n: int, ctx: int) -> float:
    return sum(p.forward_s(min(UBATCH, n - i), ctx + i) for i in range(0, n, UBATCH))


# Mirrors the charges in engine/sim/backend.py, operation by operation.
PREDICT: dict[str, Callable[[CostProfile, int, int], float]] = {
    "verify_live": lambda p, b, c: p.forward_s(b, c),
    "verify_per_token": lambda p, b, c: p.forward_s(b, c) + p.intermediate_write_s(b),
    "verify_deferred": lambda p, b, c: p.forward_s(b, c),
    "snapshot": lambda p, b, c: p.copy_s(),
    "restore": lambda p, b, c: p.copy_s(),
    "select": lambda p, b, c: p.copy_s(),
    "replay_inputs": lambda p, b, c: p.recurrence_s(b),
    "prefill": _prefill_s,
}


def predict(profile: CostProfile, op: str, batch: int, ctx: int) -> float:
    """The sim's time for one operation under `profile`."""
    return PREDICT[op](profile, batch, ctx)


def points_of(grid: Grid) -> list[tuple[str, int, int]]:
    """Every (operation, batch, context) the grid measures."""
    out = [(op, b, c) for c in grid.contexts for op in ("verify_live", "verify_per_token",
                                                          "verify_deferred")
           for b in grid.batches]
    out += [(op, 1, c) for c in grid.contexts for op in ("snapshot", "restore")]
    out += [(op, b, grid.contexts[0]) for op in ("select", "replay_inputs")
            for b in grid.batches]
    out += [("prefill", n, 0) for n in grid.prefills]
    return out


# --- fitting ------------------------------------------------------------------------


def _with_rates(base: CostProfile, x: np.ndarray) -> CostProfile:
    return replace(base, **dict(zip(FITTED, (float(v) for v in np.exp(x)), strict=True)))


def _levenberg_marquardt(residual: Callable[[np.ndarray], np.ndarray], x0: np.ndarray,
                         iterations: int = 200) -> tuple[np.ndarray, float]:
    """Minimise |residual(x)|² from x0; return x and the cost. The Jacobian is numeric;
    steps come from least squares, so a direction the data does not constrain (a rate
    that no measured point depends on) gets no step instead of a singular system."""
    x, r = x0, residual(x0)
    cost, damping, h = float(r @ r), 1e-2, 1e-5
    for _ in range(iterations):
        jac = np.column_stack([(residual(x + h * e) - r) / h for e in np.eye(len(x))])
        scale = np.sqrt((jac * jac).sum(axis=0)) + 1e-12
        while True:
            a = np.vstack([jac, math.sqrt(damping) * np.diag(scale)])
            b = np.concatenate([-r, np.zeros(len(x))])
            step = np.linalg.lstsq(a, b, rcond=None)[0]
            r_new = residual(x + step)
            new_cost = float(r_new @ r_new)
            if new_cost < cost:
                break
            damping *= 4
            if damping > 1e12:
                return x, cost
        done = cost - new_cost < 1e-12 * max(cost, 1e-30)
        x, r, cost, damping = x + step, r_new, new_cost, max(damping / 3, 1e-9)
        if done:
            break
    return x, cost


def fit(points: Sequence[Point], base: CostProfile) -> CostProfile:
    """`base` with its rates (`FITTED`) fitted to `points` by least squares on the log of
    predicted over measured time, every operation weighted alike. The max() of the
    forward model makes the problem piecewise, so several starts are tried."""
    counts = Counter(p.op for p in points)
    weight = np.array([1 / math.sqrt(counts[p.op]) for p in points])
    measured = np.log([p.seconds for p in points])

    def residual(x: np.ndarray) -> np.ndarray:
        prof = _with_rates(base, x)
        pred = [predict(prof, p.op, p.batch, p.ctx) for p in points]
        return weight * (np.log(pred) - measured)

    copies = [p.seconds for p in points if p.op in ("snapshot", "restore", "select")]
    copy_bw = base.state_bytes / statistics.median(copies) if copies else base.copy_bw
    starts = [np.log([launch, bw, flops, copy_bw])
              for launch in (1e-5, 1e-3) for bw in (1e9, 1e11) for flops in (1e9, 1e11)]
    best, _ = min((_levenberg_marquardt(residual, x0) for x0 in starts), key=lambda f: f[1])
    return _with_rates(base, best)


def fit_errors(points: Sequence[Point], profile: CostProfile) -> dict[str, dict[str, float]]:
    """Per operation: relative RMS and largest relative error of predicted vs measured."""
    rel: dict[str, list[float]] = defaultdict(list)
    for p in points:
        rel[p.op].append(predict(profile, p.op, p.batch, p.ctx) / p.seconds - 1)
    return {op: {"rel_rms": math.sqrt(sum(e * e for e in errs) / len(errs)),
                 "max_rel": max(abs(e) for e in errs), "points": len(errs)}
            for op, errs in rel.items()}


# --- measuring ----------------------------------------------------------------------


def physical_profile(backend: TorchBackend, model: str) -> CostProfile:
    """The model's sizes as a profile; its rates are placeholders until fitted."""
    m = backend.model
    cfg = m.config
    params = sum(p.numel() for p in m.parameters())
    elem = m.embed_tokens.weight.element_size()
    n_full = sum(kind == FULL_ATTENTION for kind in cfg.layer_types)
    state = backend.new_state()
    kept = backend.verify(state, [1, 2], VerifyMode.DEFERRED).kept
    return CostProfile(
        name=PROFILE_NAME,
        weight_bytes=float(sum(p.numel() * p.element_size() for p in m.parameters())),
        hbm_bw=1e10,
        flops_per_token=2.0 * params,  # a multiply-add per weight
        peak_flops=1e10,
        kv_bytes_per_token=float(n_full * 2 * cfg.num_key_value_heads * cfg.head_dim * elem),
        state_bytes=float(backend.state_bytes()),
        copy_bw=1e10,
        launch_s=1e-3,
        description=f"{model} (torch backend) on {cpu_name()}",
        input_bytes_per_token=kept.nbytes / kept.length,
    )


Thunk = Callable[[], object]


def _thunk(backend: TorchBackend, state: HybridState, op: str, tokens: list[int]) -> Thunk:
    """Prepare one sample of `op` (untimed) and return the call to time."""
    if op.startswith("verify_"):
        mode = VerifyMode(op.removeprefix("verify_"))
        return lambda: backend.verify(state, tokens, mode)
    if op == "snapshot":
        return lambda: backend.snapshot(state)
    if op == "restore":
        snap = backend.snapshot(state)
        backend.verify(state, tokens, VerifyMode.LIVE)
        return lambda: backend.restore(state, snap)
    if op == "select":
        kept = backend.verify(state, tokens, VerifyMode.PER_TOKEN).kept
        return lambda: backend.select(state, kept, len(tokens) - 1)
    if op == "replay_inputs":
        kept = backend.verify(state, tokens, VerifyMode.DEFERRED).kept
        return lambda: backend.replay_inputs(state, kept, len(tokens))
    if op == "prefill":
        fresh = backend.new_state()
        return lambda: backend.prefill(fresh, tokens)
    raise ValueError(f"no measurement for operation '{op}'")


def measure(backend: TorchBackend, grid: Grid, seed: int, opts: BenchOptions) -> list[Point]:
    """Median seconds of every grid point. Each repeat goes round the whole grid in a
    new random order rather than one point at a time, so a burst of load from other
    processes spreads over many points' samples instead of taking all of a few points'."""
    rng = random.Random(seed)
    states: dict[int, HybridState] = {}
    for ctx in grid.contexts:
        states[ctx] = backend.new_state()
        if ctx:
            backend.prefill(states[ctx], [rng.randrange(BYTE_TOKENS) for _ in range(ctx)])
    plan = points_of(grid)
    tokens = {(op, b, c): [rng.randrange(BYTE_TOKENS) for _ in range(b)] for op, b, c in plan}
    samples: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    for r in range(grid.repeat + 1):  # the first pass warms up and is not kept
        opts.log(f"calibration: pass {r + 1}/{grid.repeat + 1} over {len(plan)} points")
        for key in rng.sample(plan, len(plan)):
            op, _, ctx = key
            state = states[ctx]
            snap = backend.snapshot(state)
            call = _thunk(backend, state, op, tokens[key])
            start = time.perf_counter()
            call()
            took = time.perf_counter() - start
            backend.restore(state, snap)
            if r:
                samples[key].append(took)
    return [Point(op, b, c, statistics.median(samples[op, b, c])) for op, b, c in plan]


# --- validation ---------------------------------------------------------------------


def _record(config: RunConfig, backend: Backend, db: str) -> tuple[int, list[TurnMetrics],
                                                                   float]:
    """Run `config` on `backend` into a new session of `db`; its id, turns and the
    seconds its drafters took (the sim's drafters are free, so they are left out)."""
    kernels = getattr(backend, "kernels", None)
    if kernels is not None:  # record what ran, as `run_session` does
        config = config.replace(kernels=kernels.value)
    engine = open_db(db, create=True)
    try:
        sid = create_session(engine, config=config.to_dict(), backend=config.backend.value,
                             seeds={"seed": config.seed}, code_version=code_version(),
                             model_digest=getattr(backend, "model_digest", None))
        with Recorder(engine, sid) as rec:
            turns = Session(config, rec, backend=backend).run()
        draft_s = sum(e.duration for e in iter_events(engine, sid)
                      if e.trigger is Trigger.DRAFT)
    finally:
        engine.dispose()
    return sid, turns, draft_s


def synthetic_acceptance(accepted_per_round: float, k: int) -> float:
    """The per-token chance p at which the synthetic drafter's k-token drafts accept
    `accepted_per_round` tokens on average (p + p² + ... + p^k, stopping at a miss)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(mid**i for i in range(1, k + 1)) < accepted_per_round:
            lo = mid
        else:
            hi = mid
    return lo


def validate(torch_config: RunConfig, backend: Backend, profile: CostProfile,
             db: str) -> dict[str, Any]:
    """One torch conversation and the sim's version of it (same prompt length, answer
    length, draft length and acceptance) under `profile`: decode time per committed
    token, measured and predicted."""
    tid, turns, draft_s = _record(torch_config, backend, db)
    t = turns[0]
    plain = torch_config.drafter == "none"
    sim_config = RunConfig(
        backend="sim", strategy=torch_config.strategy, draft_max=torch_config.draft_max,
        turns=1, prompt_tokens=t.prompt_tokens, answer_tokens=max(1, t.generated_tokens - 1),
        audit=False, profile=profile.name, seed=torch_config.seed,
        drafter="none" if plain else "synthetic",
        acceptance=0.0 if plain else synthetic_acceptance(t.accepted / t.rounds,
                                                          torch_config.draft_max),
    )
    sid, sim_turns, _ = _record(sim_config, SimBackend(sim_config, profile), db)
    s = sim_turns[0]
    measured = (t.decode_s - draft_s) / t.generated_tokens
    predicted = s.decode_s / s.generated_tokens
    return {
        "drafter": torch_config.drafter, "strategy": torch_config.strategy.value,
        "sessions": {"torch": tid, "sim": sid},
        "torch": {"generated": t.generated_tokens, "rounds": t.rounds,
                  "acceptance": t.acceptance, "decode_s": t.decode_s, "draft_s": draft_s},
        "sim": {"generated": s.generated_tokens, "rounds": s.rounds,
                "acceptance": s.acceptance, "decode_s": s.decode_s,
                "synthetic_acceptance": sim_config.acceptance},
        "measured_s_per_token": measured,
        "predicted_s_per_token": predicted,
        "error": predicted / measured - 1,
    }


# --- report -------------------------------------------------------------------------


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def plot(points: Sequence[Point], profile: CostProfile, folder: Path) -> list[Path]:
    """Measured (markers) and fitted (lines) live-verify time against batch size, at the
    smallest, a middle and the largest context."""
    fig, ax = new_figure()
    live = [p for p in points if p.op == "verify_live"]
    contexts = sorted({p.ctx for p in live})
    shown = sorted({contexts[0], contexts[len(contexts) // 2], contexts[-1]})
    for ctx in shown:
        row = sorted((p for p in live if p.ctx == ctx), key=lambda p: p.batch)
        batches = [p.batch for p in row]
        (line,) = ax.plot(batches, [1e3 * predict(profile, "verify_live", b, ctx)
                                    for b in batches], label=f"fitted, context {ctx}")
        ax.plot(batches, [1e3 * p.seconds for p in row], "o", color=line.get_color(),
                label=f"measured, context {ctx}")
    ax.set_xlabel("verify batch (tokens)")
    ax.set_ylabel("forward time (ms)")
    ax.set_title("Torch backend forward: measured vs fitted cost model")
    ax.legend(fontsize="small")
    return save_figure(fig, folder / "forward_fit")


def table(profile: CostProfile, errors: dict[str, dict[str, float]],
          validation: list[dict[str, Any]]) -> str:
    """The fitted constants, the fit error per operation and the validation."""
    rows: list[tuple[str, ...]] = [
        ("launch_s (fitted)", f"{1e3 * profile.launch_s:.3f} ms"),
        ("hbm_bw (fitted, effective)", f"{profile.hbm_bw / 1e9:.2f} GB/s"),
        ("peak_flops (fitted, effective)", f"{profile.peak_flops / 1e9:.2f} GFLOP/s"),
        ("copy_bw (fitted, effective)", f"{profile.copy_bw / 1e9:.2f} GB/s"),
        ("weight_bytes (model)", f"{profile.weight_bytes:,.0f}"),
        ("flops_per_token (model)", f"{profile.flops_per_token:,.0f}"),
        ("kv_bytes_per_token (model)", f"{profile.kv_bytes_per_token:,.0f}"),
        ("state_bytes (model)", f"{profile.state_bytes:,.0f}"),
        ("input_bytes_per_token (model)", f"{profile.input_bytes_per_token:,.0f}"),
    ]
    constants = md_table(["constant", "value"], rows)
    fit_rows = [(op, e["points"], f"{100 * e['rel_rms']:.1f}%", f"{100 * e['max_rel']:.1f}%")
                for op, e in errors.items()]
    fits = md_table(["operation", "points", "relative RMS", "max abs error"], fit_rows)
    val_rows = [(f"{v['drafter']}/{v['strategy']}",
                 f"{1e3 * v['measured_s_per_token']:.2f}",
                 f"{1e3 * v['predicted_s_per_token']:.2f}", f"{100 * v['error']:+.1f}%")
                for v in validation]
    checks = md_table(["conversation (1 turn)", "measured ms/token, drafting excluded",
                       "sim ms/token", "error"], val_rows)
    return f"{constants}\n\n{fits}\n\n{checks}\n"


def machine(threads: int) -> dict[str, Any]:
    """Where the profile was measured."""
    import torch

    return {"cpu": cpu_name(), "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "device": "cpu", "threads": threads,
            "device_note": "the torch backend has no device selection (it builds its "
                           "inputs on the CPU): calibrated on the CPU"}


def run(opts: BenchOptions) -> SuiteResult:
    """Measure, fit, validate, write the profile and the plot."""
    import torch

    from engine.hybrid.backend import TorchBackend
    from engine.hybrid.loader import load_checkpoint

    torch.set_num_threads(opts.threads)
    grid = QUICK if opts.quick else FULL
    base = RunConfig(backend="torch", model=opts.model, draft_model=opts.draft_model,
                     turns=1, audit=False, max_answer_tokens=grid.answer_tokens,
                     seed=opts.seed)
    checkpoint = load_checkpoint(opts.model)
    backend = TorchBackend(base.replace(drafter="none"), checkpoint)
    start = time.perf_counter()
    points = measure(backend, grid, opts.seed, opts)
    measure_s = time.perf_counter() - start
    opts.log(f"calibration: fitting {len(points)} points")
    profile = fit(points, physical_profile(backend, opts.model))
    errors = fit_errors(points, profile)
    validation = []
    for drafter in ("none", "mtp"):
        opts.log(f"calibration: validating on a conversation, drafter {drafter}")
        config = base.replace(drafter=drafter)
        validation.append(validate(config, TorchBackend(config, checkpoint), profile, opts.db))
    now = datetime.now(UTC)
    profile = replace(profile, description=f"{profile.description}, {opts.threads} "
                                           f"thread(s), measured {now:%Y-%m-%d}")
    calibration = {
        "date": now.isoformat(timespec="seconds"), "machine": machine(opts.threads),
        "model": opts.model, "model_digest": backend.model_digest, "quick": opts.quick,
        "fitted": list(FITTED), "grid": asdict(grid), "measure_s": measure_s,
        "fit_error": errors, "validation": validation, "command": COMMAND,
        "code_version": code_version(),
    }
    folder = opts.suite_dir("calibration")
    files = [save_profile(profile, folder, calibration)]
    if not opts.quick:  # the shipped profile is the one a full run measured
        files.append(save_profile(profile, PROFILE_DIR, calibration))
    files += plot(points, profile, folder)
    data = {"profile": profile.name, "constants": asdict(profile), "calibration": calibration,
            "points": [asdict(p) for p in points]}
    fwd = errors["verify_live"]
    goal = Goal(
        name="cost model fit (calibration, informational)",
        target="informational (no target)",
        measured=(f"forward relative RMS {100 * fwd['rel_rms']:.1f}% (max "
                  f"{100 * fwd['max_rel']:.1f}%); decode ms/token predicted "
                  + ", ".join(f"{v['drafter']} {100 * v['error']:+.1f}%" for v in validation)),
        met=True,
        command=COMMAND,
    )
    sessions = [sid for v in validation for sid in v["sessions"].values()]
    return SuiteResult(name="calibration", data=data, table=table(profile, errors, validation),
                       goals=[goal], files=files, sessions=sessions)
