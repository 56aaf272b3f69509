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

The profile is written as JSON into the suite's folder, where `--profile
<out>/calibration/hybrid-tiny-cpu-measured.json` finds it; a recorded run (`--record`,
a full one) also stores it in `engine/sim/profiles/`, where `--profile
hybrid-tiny-cpu-measured` finds it. The suite reports no goal: its table holds the fit and
validation errors.

It runs on the benchmark's device (`--device`, CUDA when present under `auto`); a CUDA
run stores its profile as `hybrid-tiny-cuda-measured`, beside the CPU one.

The cost model and its fit are in `fit.py`, the timings in `measure.py`, the validation
conversations in `validate.py`; this module runs them and reports. `--backend llama` fits
a profile to llama.cpp's llama-server instead (`llama/`).
"""

from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from engine.sim.costs import PROFILE_DIR, CostProfile, save_profile
from specbench.calibration.fit import FITTED, Point, fit, fit_errors, predict
from specbench.calibration.measure import (
    FULL,
    QUICK,
    machine,
    measure,
    physical_profile,
)
from specbench.calibration.validate import TorchRun, torch_run, validate
from specbench.common import (
    BenchOptions,
    SuiteResult,
    md_table,
    new_figure,
    save_figure,
    timed,
)
from specledger.api import code_version

PROFILE_NAME = "hybrid-tiny-cpu-measured"  # the shipped one, measured on this project's CPU
COMMAND = "specledger bench calibration"
DRAFTERS = ("none", "mtp")  # the validation conversations: plain decode, then MTP


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


def run(opts: BenchOptions) -> SuiteResult:
    """Measure (with the validation conversations between the passes), fit, validate,
    write the profile and the plot; under `--backend llama`, the llama.cpp calibration."""
    if opts.backend == "llama":
        from specbench.calibration import llama

        return llama.run(opts)
    import torch

    from engine.hybrid.backend import TorchBackend

    torch.set_num_threads(opts.threads)
    grid = QUICK if opts.quick else FULL
    base = RunConfig(backend="torch", model=opts.model, draft_model=opts.draft_model,
                     turns=1, audit=False, max_answer_tokens=grid.answer_tokens,
                     seed=opts.seed, device=opts.device)
    checkpoint = opts.checkpoint(opts.model)
    backend = TorchBackend(base.replace(drafter="none"), checkpoint)
    name = PROFILE_NAME.replace("-cpu-", f"-{backend.device.type}-")
    configs = {d: base.replace(drafter=d) for d in DRAFTERS}
    runs: dict[str, list[TorchRun]] = {d: [] for d in DRAFTERS}

    def conversations() -> None:
        for d in DRAFTERS:
            opts.log(f"calibration: validation conversation, drafter {d}")
            runs[d].append(torch_run(configs[d], checkpoint, opts.db))

    points, measure_s = timed(measure, backend, grid, opts.seed, opts, between=conversations)
    opts.log(f"calibration: fitting {len(points)} points")
    profile = fit(points, physical_profile(backend, opts.model, name))
    errors = fit_errors(points, profile)
    validation = [validate(configs[d], runs[d], profile) for d in DRAFTERS]
    now = datetime.now(UTC)
    profile = replace(profile, description=f"{profile.description}, {opts.threads} "
                                           f"thread(s), measured {now:%Y-%m-%d}")
    calibration = {
        "date": now.isoformat(timespec="seconds"),
        "machine": machine(opts.threads, backend.device.type),
        "model": opts.model, "model_digest": backend.model_digest(), "quick": opts.quick,
        "fitted": list(FITTED), "grid": asdict(grid), "measure_s": measure_s,
        "fit_error": errors, "validation": validation, "command": COMMAND,
        "code_version": code_version(),
    }
    folder = opts.suite_dir("calibration")
    files = [save_profile(profile, folder, calibration)]
    if opts.record:  # the shipped profile changes only when a run is recorded
        files.append(save_profile(profile, PROFILE_DIR, calibration))
    files += plot(points, profile, folder)
    data = {"profile": profile.name, "constants": asdict(profile), "calibration": calibration,
            "points": [asdict(p) for p in points]}
    sessions = [sid for v in validation for sid in v["sessions"]]
    return SuiteResult(name="calibration", data=data, table=table(profile, errors, validation),
                       files=files, sessions=sessions)
