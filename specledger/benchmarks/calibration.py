"""Suite `calibration`: fit the sim's cost model to the torch backend on this machine.

The backend's operations (verify in its three modes, snapshot / restore / select, input
replay, prefill) are timed on the shipped model over a grid of batch sizes and contexts.
The sizes in `CostProfile` are physical and computed from the model (weight bytes, FLOP
per token, KV bytes per token, state bytes); the rates and fixed costs are fitted
(`FITTED`). On this CPU the model runs through torch one operator at a time, so the
fitted numbers are effective ones: a forward is a fixed cost (`launch_s`, with the weight
read) plus a cost per token (`token_s`, and compute at `peak_flops` where it binds), a
forward over more than one token pays for the chunked form of the recurrence
(`multi_token_s`) that a one-token forward skips, and the recurrence stepped outside a
forward (replay, per-position capture) costs `state_step_s` per position after a fixed
`recurrence_launch_s`.

The fit is checked twice: its error per operation over the measured points, and a
prediction: short conversations on the torch backend (plain decode and the MTP drafter)
and the same conversations on the sim with the fitted profile, compared by decode time
per committed token (drafting excluded). The sim replays the torch run's rounds exactly
(the same draft lengths and accepted counts, round by round, from its recorded events),
so the comparison tests the cost model and not an acceptance model. The torch
conversations are run between the measurement passes, so that a change in the speed of
a shared machine during the run touches both alike; the measured time is their median.
The torch runs are recorded sessions; the sim's replays are not (their drafts follow a
script, which a session's configuration cannot name). The sim's clock holds the backend's
operations only, so the engine's own work per round on torch (events, the state digest
at each commit: a few percent of a plain decode step here) is a known bias towards a low
prediction.

The profile is written as JSON into the suite's folder, and into `engine/sim/profiles/`
by a full (not quick) run, where `--profile hybrid-tiny-cpu-measured` finds it. The
suite reports no goal: its table holds the fit and validation errors.

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.backend import Backend, SeqState, VerifyMode
from engine.config import RunConfig
from engine.drafters.base import BaseDrafter
from engine.drafters.synthetic import ordinary_tokens
from engine.hybrid.config import FULL as FULL_ATTENTION
from engine.session import MemoryJournal, Session
from engine.sim.backend import UBATCH, SimBackend
from engine.sim.costs import PROFILE_DIR, CostProfile, save_profile
from engine.sim.vocab import SIM_TEMPLATE
from eventlog import iter_events, open_db
from fsm.event import Event
from fsm.states import Trigger
from specledger.api import code_version, run_session
from specledger.benchmarks.common import (
    BenchOptions,
    SuiteResult,
    md_table,
    new_figure,
    save_figure,
)

if TYPE_CHECKING:
    from engine.hybrid.backend import TorchBackend
    from engine.hybrid.loader import LoadedCheckpoint
    from engine.hybrid.state import HybridState

PROFILE_NAME = "hybrid-tiny-cpu-measured"
COMMAND = "specledger bench calibration"
# What the fit sets: every rate and fixed cost of `CostProfile`; the sizes are the model's.
FITTED = ("launch_s", "hbm_bw", "peak_flops", "token_s", "multi_token_s", "copy_bw",
          "state_step_s", "recurrence_launch_s")
DRAFTERS = ("none", "mtp")  # the validation conversations: plain decode, then MTP
BYTE_TOKENS = 256  # byte ids: ordinary tokens of the shipped tokenizer, never specials


@dataclass(frozen=True)
class Grid:
    """What is measured: verify batches (k + 1) at each context, prefill lengths, input
    replays over each batch size, `repeat` samples per point (and as many runs of each
    validation conversation, one after each pass), and the answer cap of the validation
    conversations."""

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
    rates = np.exp(np.clip(x, -80.0, 80.0))  # a wild trial step stays finite
    return replace(base, **dict(zip(FITTED, (float(v) for v in rates), strict=True)))


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
    """`base` with its rates and fixed costs (`FITTED`) fitted to `points` by least
    squares on the log of predicted over measured time, every operation weighted alike.
    The max() of the forward model makes the problem piecewise, so several starts are
    tried (compute binding early or late, weights read fast or slow)."""
    counts = Counter(p.op for p in points)
    weight = np.array([1 / math.sqrt(counts[p.op]) for p in points])
    measured = np.log([p.seconds for p in points])

    def residual(x: np.ndarray) -> np.ndarray:
        prof = _with_rates(base, x)
        pred = [predict(prof, p.op, p.batch, p.ctx) for p in points]
        return weight * (np.log(pred) - measured)

    copies = [p.seconds for p in points if p.op in ("snapshot", "restore", "select")]
    copy_bw = base.state_bytes / statistics.median(copies) if copies else base.copy_bw
    starts = [np.log([1e-3, bw, flops, 1e-4, 1e-3, copy_bw, 1e-4, 1e-4])
              for bw in (1e9, 1e11) for flops in (1e9, 1e11)]
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


def measure(backend: TorchBackend, grid: Grid, seed: int, opts: BenchOptions,
            between: Callable[[], object] | None = None) -> list[Point]:
    """Median seconds of every grid point. Each repeat goes round the whole grid in a
    new random order rather than one point at a time, so a burst of load from other
    processes spreads over many points' samples instead of taking all of a few points'.
    `between` runs after every kept pass (the validation conversations)."""
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
        if r and between is not None:
            between()
    return [Point(op, b, c, statistics.median(samples[op, b, c])) for op, b, c in plan]


# --- validation ---------------------------------------------------------------------


Script = list[tuple[int, int]]  # per drafting round: drafts proposed, drafts accepted


@dataclass(frozen=True)
class TorchRun:
    """One recorded torch conversation (one turn): its session, its turn's numbers, the
    seconds its drafter took and what each drafting round drafted and accepted."""

    session: int
    prompt_tokens: int
    generated: int
    rounds: int
    decode_s: float
    draft_s: float
    script: Script

    @property
    def s_per_token(self) -> float:
        """Decode seconds per committed token, drafting excluded (the sim's drafters are
        free)."""
        return (self.decode_s - self.draft_s) / self.generated


def round_script(events: Iterable[Event]) -> tuple[Script, float]:
    """What each drafting round of a recorded session drafted and accepted, in order, and
    the seconds spent drafting."""
    script: Script = []
    open_round: tuple[int, int] | None = None
    draft_s = 0.0
    for e in events:
        if e.trigger is Trigger.DRAFT:
            draft_s += e.duration
            script.append((len(e.payload["drafts"]), 0))
            open_round = (e.turn, e.round)
        elif e.trigger in (Trigger.ACCEPT, Trigger.REJECT) and open_round == (e.turn, e.round):
            script[-1] = (script[-1][0], e.payload["matched"])
            open_round = None
    return script, draft_s


def torch_run(config: RunConfig, checkpoint: LoadedCheckpoint, db: str) -> TorchRun:
    """Run and record `config` (one turn) on a torch backend over `checkpoint`."""
    from engine.hybrid.backend import TorchBackend

    result = run_session(config, db, backend=TorchBackend(config, checkpoint))
    engine = open_db(db, create=False)
    try:
        script, draft_s = round_script(iter_events(engine, result.session_id))
    finally:
        engine.dispose()
    t = result.turns[0]
    return TorchRun(result.session_id, t.prompt_tokens, t.generated_tokens, t.rounds,
                    t.decode_s, draft_s, script)


class ScriptedDrafter(BaseDrafter):
    """Drafts by a script: round i proposes `drafted` tokens, of which the first
    `accepted` are the target's own (read with `peek`) and the rest are not. On the sim
    it replays a recorded run's rounds, whatever the sim's tokens are."""

    name = "scripted"

    def __init__(self, script: Script) -> None:
        self._rounds = iter(script)

    def propose(self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
                ) -> list[int]:
        """The next round's drafts (none once the script is done)."""
        drafted, accepted = next(self._rounds, (0, 0))
        vocab = ordinary_tokens(backend.template)
        batch = [tokens[-1]]
        for i in range(min(drafted, k)):
            truth = backend.peek(state, batch)[-1]
            batch.append(truth if i < accepted else (truth + 1) % vocab)
        return batch[1:]


def sim_replay(run: TorchRun, torch_config: RunConfig, profile: CostProfile
               ) -> dict[str, Any]:
    """The torch conversation `run` on the sim under `profile`: the same prompt length,
    answer length, draft lengths and accepted counts round by round."""
    cap = torch_config.answer_cap
    capped = run.generated >= cap  # the torch answer hit the cap rather than ending
    config = RunConfig(
        backend="sim", strategy=torch_config.strategy, draft_max=torch_config.draft_max,
        turns=1, audit=False, profile=profile.name, seed=torch_config.seed, drafter="none",
        prompt_tokens=max(1, run.prompt_tokens - len(SIM_TEMPLATE.next_prompt([], []))),
        # the sim's answer ends after answer_tokens + 1 visible tokens
        answer_tokens=cap + 1 if capped else max(1, run.generated - 1), max_answer_tokens=cap,
    )
    session = Session(config, MemoryJournal(), backend=SimBackend(config, profile))
    if torch_config.drafter != "none":
        session.slots[0].drafter = ScriptedDrafter(run.script)
    t = session.run()[0]
    return {"prompt_tokens": t.prompt_tokens, "generated": t.generated_tokens,
            "rounds": t.rounds, "drafted": t.drafted, "accepted": t.accepted,
            "decode_s": t.decode_s, "s_per_token": t.decode_s / t.generated_tokens}


def validate(torch_config: RunConfig, runs: Sequence[TorchRun], profile: CostProfile
             ) -> dict[str, Any]:
    """The recorded torch runs of one conversation against the sim's replay of the first
    under `profile`: decode time per committed token, measured (median over the runs)
    and predicted."""
    first = runs[0]
    sim = sim_replay(first, torch_config, profile)
    per_token = [r.s_per_token for r in runs]
    measured = statistics.median(per_token)
    return {
        "drafter": torch_config.drafter, "strategy": torch_config.strategy.value,
        "draft_max": torch_config.draft_max, "sessions": [r.session for r in runs],
        "torch": {"prompt_tokens": first.prompt_tokens, "generated": first.generated,
                  "rounds": first.rounds,
                  "drafted": sum(d for d, _ in first.script),
                  "accepted": sum(a for _, a in first.script),
                  "same_rounds_every_run": all(r.script == first.script for r in runs),
                  "s_per_token": per_token, "decode_s": [r.decode_s for r in runs],
                  "draft_s": [r.draft_s for r in runs]},
        "sim": sim,
        "measured_s_per_token": measured,
        "predicted_s_per_token": sim["s_per_token"],
        "error": sim["s_per_token"] / measured - 1,
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


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{1e3 * seconds:.3f} ms"


def table(profile: CostProfile, errors: dict[str, dict[str, float]],
          validation: list[dict[str, Any]]) -> str:
    """The fitted constants, the fit error per operation and the validation."""
    rows: list[tuple[str, ...]] = [
        ("launch_s (fitted): fixed cost of a forward", _ms(profile.launch_s)),
        ("token_s (fitted): per token of a forward", _ms(profile.token_s)),
        ("multi_token_s (fitted): chunked form, forwards of 2+ tokens",
         _ms(profile.multi_token_s)),
        ("hbm_bw (fitted, effective): weights and KV", f"{profile.hbm_bw / 1e9:.2f} GB/s"),
        ("peak_flops (fitted, effective)", f"{profile.peak_flops / 1e9:.2f} GFLOP/s"),
        ("copy_bw (fitted, effective): state copies", f"{profile.copy_bw / 1e9:.2f} GB/s"),
        ("state_step_s (fitted): per position stepped outside a forward",
         _ms(profile.state_step_s)),
        ("recurrence_launch_s (fitted): fixed cost of a replay",
         _ms(profile.recurrence_launch_s)),
        ("weight_bytes (model)", f"{profile.weight_bytes:,.0f}"),
        ("flops_per_token (model)", f"{profile.flops_per_token:,.0f}"),
        ("kv_bytes_per_token (model)", f"{profile.kv_bytes_per_token:,.0f}"),
        ("state_bytes (model)", f"{profile.state_bytes:,.0f}"),
        ("input_bytes_per_token (model)", f"{profile.input_bytes_per_token:,.0f}"),
    ]
    constants = md_table(["constant", "value"], rows)
    fit_rows = [(op, e["points"], f"{100 * e['rel_rms']:.1f}%", f"{100 * e['max_rel']:.1f}%")
                for op, e in errors.items()]
    fits = md_table(["operation", "points", "fit error (relative RMS)", "max abs error"],
                    fit_rows)
    val_rows = []
    for v in validation:
        t, sim = v["torch"], v["sim"]
        ms = [1e3 * x for x in t["s_per_token"]]
        val_rows.append((
            f"{v['drafter']}/{v['strategy']}, draft {v['draft_max']}",
            f"{t['generated']} / {t['rounds']} / {t['accepted']}",
            f"{sim['generated']} / {sim['rounds']} / {sim['accepted']}",
            f"{1e3 * v['measured_s_per_token']:.2f} ({min(ms):.2f}..{max(ms):.2f}, "
            f"{len(ms)} runs)",
            f"{1e3 * v['predicted_s_per_token']:.2f}", f"{100 * v['error']:+.1f}%"))
    checks = md_table(["conversation (1 turn)", "torch tokens / rounds / accepted",
                       "sim tokens / rounds / accepted",
                       "measured ms/token, drafting excluded (median, range)",
                       "sim ms/token", "validation error"], val_rows)
    fwd = errors["verify_live"]
    summary = (f"Fit error of a forward (live verify): {100 * fwd['rel_rms']:.1f}% relative "
               "RMS. Validation, sim against the real engine in decode time per committed "
               "token: " + ", ".join(f"{v['drafter']} {100 * v['error']:+.1f}%"
                                     for v in validation) + ". The sim charges the "
               "backend's operations only: the engine's own work per round on torch (its "
               "events, the state digest at each commit) is not in its clock.")
    return f"{summary}\n\n{constants}\n\n{fits}\n\n{checks}\n"


def machine(threads: int) -> dict[str, Any]:
    """Where the profile was measured."""
    import torch

    return {"cpu": cpu_name(), "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "device": "cpu", "threads": threads,
            "device_note": "the torch backend has no device selection (it builds its "
                           "inputs on the CPU): calibrated on the CPU"}


def run(opts: BenchOptions) -> SuiteResult:
    """Measure (with the validation conversations between the passes), fit, validate,
    write the profile and the plot."""
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
    configs = {d: base.replace(drafter=d) for d in DRAFTERS}
    runs: dict[str, list[TorchRun]] = {d: [] for d in DRAFTERS}

    def conversations() -> None:
        for d in DRAFTERS:
            opts.log(f"calibration: validation conversation, drafter {d}")
            runs[d].append(torch_run(configs[d], checkpoint, opts.db))

    start = time.perf_counter()
    points = measure(backend, grid, opts.seed, opts, between=conversations)
    measure_s = time.perf_counter() - start
    opts.log(f"calibration: fitting {len(points)} points")
    profile = fit(points, physical_profile(backend, opts.model))
    errors = fit_errors(points, profile)
    validation = [validate(configs[d], runs[d], profile) for d in DRAFTERS]
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
    sessions = [sid for v in validation for sid in v["sessions"]]
    return SuiteResult(name="calibration", data=data, table=table(profile, errors, validation),
                       files=files, sessions=sessions)
