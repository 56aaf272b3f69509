"""`specledger bench calibration --backend llama`: the sim's cost model fitted to
llama.cpp's llama-server running the shipped model (its f32 GGUF export) on this CPU, and
checked by predicting llama-server's speculative speed on prompts the fit never saw.

The fit uses llama-server's own timings (`measure.py`) of prompt
processing, plain decode, draft-mtp rounds (per-token recurrent states, `n_rs_seq`: no
checkpoint) and ngram-mod rounds (no `n_rs_seq`: a whole-state checkpoint in host memory
saved every round, restored on a reject) on the first `fit_prompts` held-out prompts;
the model and its fit are `fit.py`. The validation
(`validate.py`) replays the next `val_prompts` prompts' rounds on the sim
under the fitted profile and compares decode tokens/s per drafter, and compares a
multi-turn llama-server conversation's per-turn re-prefilled history with the sim's.

The profile is written as `llama-tiny-cpu-measured.json` into the suite's folder
(`<out>/calibration_llama/`); a recorded run also stores it in `engine/sim/profiles/`.
`quick` is a smoke run (two fit prompts, one held out, 16 tokens): numbers not to quote.
"""

import os
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from engine.config import RunConfig
from engine.sim.costs import PROFILE_DIR, CostProfile, save_profile
from specbench.calibration.llama.fit import Row, fit, fit_errors, predict
from specbench.calibration.llama.measure import (
    Options,
    Timed,
    Trace,
    check_same,
    server_options,
    timed_passes,
    traces,
)
from specbench.calibration.llama.profiles import report as public_report
from specbench.calibration.llama.validate import reprefill_check, validate
from specbench.common import BenchOptions, Goal, SuiteResult, md_table, panels, save_figure
from specledger.api import code_version

SUITE = "calibration_llama"
PROFILE_NAME = "llama-tiny-cpu-measured"
COMMAND = "specledger bench calibration --backend llama"
DRAFTERS = ("none", "mtp", "ngram-mod")
BAND = 0.15  # the validation's target: every drafter's tok/s within 15%


@dataclass(frozen=True)
class Plan:
    """Prompts for the fit and (disjoint) for the validation, the answer cap, the draft
    length, timed passes, and the turns of the re-prefill conversation."""

    fit_prompts: int
    val_prompts: int
    tokens: int
    draft: int
    repeat: int
    turns: int


FULL = Plan(fit_prompts=8, val_prompts=8, tokens=128, draft=8, repeat=5, turns=3)
QUICK = Plan(fit_prompts=2, val_prompts=1, tokens=16, draft=8, repeat=1, turns=2)


def memcpy_bw(nbytes: int, repeat: int = 200) -> float:
    """Bytes/s of copying a buffer of `nbytes` within host memory (the median of
    `repeat` copies): the rate of a state copy on this CPU."""
    src = np.ones(max(1, nbytes // 8))
    dst = np.empty_like(src)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t)
    return src.nbytes / float(np.median(times))


def base_profile(opts: BenchOptions, target: Path) -> CostProfile:
    """The shipped model's sizes (the GGUF file's bytes; KV and state from the model)
    with placeholder rates, checkpoints in host memory at the memcpy rate."""
    from engine.hybrid.backend import TorchBackend
    from specbench.calibration.measure import FULL_ATTENTION, cpu_name, physical_profile

    backend = TorchBackend(RunConfig(backend="torch", model=opts.model, audit=False,
                                     device="cpu"), opts.checkpoint(opts.model))
    sizes = physical_profile(backend, opts.model, PROFILE_NAME)
    bw = memcpy_bw(int(sizes.state_bytes))
    recurrent = sum(kind != FULL_ATTENTION for kind in backend.model.config.layer_types)
    return replace(sizes, weight_bytes=float(target.stat().st_size), copy_bw=bw, host_bw=bw,
                   checkpoint_place="host", state_tensors=2 * recurrent,
                   description=f"{opts.model} as f32 GGUF on llama.cpp's llama-server, "
                               f"{cpu_name()}")


def _rows(plan_traces: dict[str, list[Trace]], timed: dict[str, list[Timed]]) -> list[Row]:
    rows = []
    for d in DRAFTERS:
        for tr, t in zip(plan_traces[d], timed[d], strict=True):
            rows.append(Row(f"decode/{d}", d, tr, t.decode_s))
            if d != "mtp":  # draft-mtp's prompt phase also runs the MTP head
                rows.append(Row("prefill", d, tr, t.prefill_s))
    return rows


def table(profile: CostProfile, mtp_token_s: float, errors: dict[str, dict[str, float]],
          validation: list[dict[str, Any]], reprefill: dict[str, Any], loads: list[float]
          ) -> str:
    """The fitted constants, the fit error per kind, the validation and the re-prefill."""
    ms = lambda s: f"{1e3 * s:.4f} ms"  # noqa: E731
    constants = md_table(["constant", "value"], [
        ("launch_s (fitted): fixed cost of a forward", ms(profile.launch_s)),
        ("token_s (fitted): per token of a forward", ms(profile.token_s)),
        ("multi_token_s (fitted): forwards of 2+ tokens", ms(profile.multi_token_s)),
        ("hbm_bw (fitted, effective): weights and KV", f"{profile.hbm_bw / 1e9:.2f} GB/s"),
        ("round_sync_s (fitted): per speculative round", ms(profile.round_sync_s)),
        (f"tensor_copy_s (fitted): per state tensor copied to or from host memory "
         f"({profile.state_tensors} a checkpoint)", ms(profile.tensor_copy_s)),
        ("mtp_token_s (fitted, beside the profile): MTP head per drafted token",
         ms(mtp_token_s)),
        ("host_bw = copy_bw (measured memcpy of one state)", f"{profile.copy_bw / 1e9:.2f} GB/s"),
        ("checkpoint_place", profile.checkpoint_place),
        ("weight_bytes (GGUF file) / state_bytes (model)",
         f"{profile.weight_bytes:,.0f} / {profile.state_bytes:,.0f}"),
    ])
    fits = md_table(["rows (fit prompts)", "points", "relative RMS", "max abs error"],
                    [(k, e["points"], f"{100 * e['rel_rms']:.1f}%", f"{100 * e['max_rel']:.1f}%")
                     for k, e in errors.items()])
    val = md_table(
        ["drafter (held-out prompts)", "tokens / drafted / accepted (llama.cpp; sim)",
         "llama.cpp tok/s (median request times; passes' range)", "sim tok/s", "error",
         f"within {100 * BAND:.0f}%"],
        [(v["drafter"], f"{v['generated']} / {v['drafted']} / {v['accepted']}; "
          f"{v['sim_generated']} / {v['sim_drafted']} / {v['sim_accepted']}",
          f"{v['measured_tok_s']:.0f} ({min(v['measured_tok_s_per_pass']):.0f}.."
          f"{max(v['measured_tok_s_per_pass']):.0f})", f"{v['predicted_tok_s']:.0f}",
          f"{100 * v['error']:+.1f}%", "yes" if abs(v["error"]) <= BAND else "**no**")
         for v in validation])
    re = (f"Re-prefilled history per turn, {reprefill['turns']}-turn {reprefill['drafter']} "
          f"conversation (session {reprefill['session']}): llama.cpp "
          f"{reprefill['llama_reprefill']}, sim {reprefill['sim_reprefill']}: "
          f"{'exact' if reprefill['exact'] else '**different**'}.")
    load = (f"Load average (1 min) after each timed pass: "
            f"{', '.join(f'{x:.2f}' for x in loads)} on {os.cpu_count() or 1} cores.")
    return f"{constants}\n\n{fits}\n\n{val}\n\n{re}\n\n{load}\n\n{public_report()}"


def plot(rows: list[Row], held: list[Row], profile: CostProfile, mtp_token_s: float,
         validation: list[dict[str, Any]], stem: Path) -> list[Path]:
    """Left: predicted against measured seconds per request (fit and held-out prompts);
    right: held-out decode tok/s per drafter, llama.cpp beside the sim."""
    fig, (scatter, bars) = panels(2, 5.0, 4.0)
    for label, rs, marker in (("fit prompts", rows, "o"), ("held-out prompts", held, "x")):
        scatter.loglog([1e3 * r.seconds for r in rs],
                       [1e3 * predict(profile, r, mtp_token_s) for r in rs], marker,
                       label=label, alpha=0.7)
    lo = min(r.seconds for r in rows + held) * 1e3
    hi = max(r.seconds for r in rows + held) * 1e3
    scatter.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    scatter.set_xlabel("llama-server, measured (ms)")
    scatter.set_ylabel("cost model (ms)")
    scatter.set_title("requests: prefill and decode", fontsize=9)
    scatter.legend(fontsize=7)
    x = np.arange(len(validation))
    bars.bar(x - 0.2, [v["measured_tok_s"] for v in validation], 0.4, label="llama.cpp")
    bars.bar(x + 0.2, [v["predicted_tok_s"] for v in validation], 0.4, label="sim")
    bars.set_xticks(x, [v["drafter"] for v in validation])
    bars.set_title("held-out decode tokens/s", fontsize=9)
    bars.legend(fontsize=7)
    return save_figure(fig, stem)


def _measure(opts: BenchOptions, plan: Plan, options: Options, prompts: list
             ) -> tuple[dict, dict, list]:
    """Each drafter's traced (`-v`) requests and its interleaved timed passes, checked to be
    the same requests, and the load averages the passes saw."""
    from specbench.common import server_logs
    from specbench.llama.runs import warmup_prompt

    logs = server_logs(SUITE)
    shapes = {d: traces(options, d, prompts, plan.tokens, logs / f"{d}-verbose.log")
              for d in DRAFTERS}
    timed, loads = timed_passes(options, DRAFTERS, prompts, plan.tokens, plan.repeat, logs,
                                warmup_prompt(), opts.log)
    for d in DRAFTERS:
        for tr, t in zip(shapes[d], timed[d], strict=True):
            check_same(tr, t)
    return shapes, timed, loads


def _fit_goal(validation: list[dict], reprefill: dict, quick: bool) -> Goal:
    """The held-out goal of the fitted profile and the re-prefill check."""
    return Goal(name="sim predicts llama.cpp's decode tok/s on held-out prompts (plain, "
                     "draft-mtp, ngram-mod) and its per-turn re-prefill",
                target=f"within {100 * BAND:.0f}% each; re-prefill exact",
                measured=", ".join(f"{v['drafter']} {100 * v['error']:+.1f}%"
                                   for v in validation)
                + f"; re-prefill {'exact' if reprefill['exact'] else 'different'}"
                + (" (quick run)" if quick else ""),
                met=all(abs(v["error"]) <= BAND for v in validation) and reprefill["exact"],
                command=COMMAND)


def _logs_part(opts: BenchOptions, folder: Path) -> tuple[dict, Goal]:
    """The cross-validation of one log's fits (specbench.calibration.llama.logs) and its goal."""
    from specbench.calibration.llama.logs import BUILDS, goal_met, held_out_summary
    from specbench.calibration.llama.logs import run as run_logs

    logs_doc = run_logs(opts.model, folder, opts.quick, opts.threads, opts.log,
                        builds=BUILDS[:1] if opts.quick else BUILDS)
    goal = Goal(name="`specledger calibrate`: every setting's log fitted predicts the "
                     "decode tok/s of every other setting of its build (drafters, draft "
                     "sizes, checkpoints, per-token states)",
                target=f"within {100 * BAND:.0f}% each inside the fit's reach; every "
                       "prediction outside it marked",
                measured="; ".join(f"{b}: {held_out_summary(p['rows'])}"
                                   for b, p in logs_doc["builds"].items())
                + (" (quick run)" if opts.quick else ""),
                met=goal_met(logs_doc), command=COMMAND)
    return logs_doc, goal


def run(opts: BenchOptions) -> SuiteResult:
    """Measure llama-server, fit, validate on held-out prompts, write the profile."""
    from adapters.llama.gguf.export import cached_gguf
    from engine.hybrid.loader import load_checkpoint
    from specbench.calibration.measure import machine
    from specbench.llama.runs import session_prompts

    plan = QUICK if opts.quick else FULL
    n = plan.fit_prompts + plan.val_prompts
    config = RunConfig(backend="torch", model=opts.model, slots=n, turns=1, seed=opts.seed,
                       draft_max=plan.draft, max_answer_tokens=plan.tokens, audit=False)
    prompts = session_prompts(config, load_checkpoint(opts.model))
    if len({tuple(p) for p in prompts}) != n:
        raise ValueError("calibration llama: the fit and held-out prompts are not disjoint")
    target = cached_gguf(opts.model)
    base = base_profile(opts, target)
    options = server_options(config, target, opts.threads)
    start = time.perf_counter()
    shapes, timed, loads = _measure(opts, plan, options, prompts)
    measure_s = time.perf_counter() - start
    k = plan.fit_prompts
    fit_part = {d: v[:k] for d, v in shapes.items()}
    held_part = {d: v[k:] for d, v in shapes.items()}
    rows = _rows(fit_part, {d: v[:k] for d, v in timed.items()})
    held_rows = _rows(held_part, {d: v[k:] for d, v in timed.items()})
    profile, mtp_token_s = fit(rows, base)
    now = datetime.now(UTC)
    profile = replace(profile, description=f"{profile.description}, {opts.threads} thread(s), "
                                           f"measured {now:%Y-%m-%d}")
    errors = fit_errors(rows, profile, mtp_token_s)
    held_errors = fit_errors(held_rows, profile, mtp_token_s)
    validation = [validate(d, held_part[d], timed[d][k:], profile, mtp_token_s, plan.tokens,
                           plan.draft) for d in DRAFTERS]
    opts.log(f"calibration llama: {plan.turns}-turn re-prefill conversation")
    reprefill = reprefill_check(RunConfig(backend="llama", model=opts.model, drafter="ngram-mod",
                                          turns=plan.turns, seed=opts.seed + 1,
                                          draft_max=plan.draft, max_answer_tokens=plan.tokens),
                                opts.db, profile)
    calibration = {
        "date": now.isoformat(timespec="seconds"), "machine": machine(opts.threads, "cpu"),
        "model": opts.model, "gguf": str(target), "quick": opts.quick, "plan": asdict(plan),
        "drafter_costs": {"mtp_token_s": mtp_token_s}, "fit_error": errors,
        "held_out_error": held_errors, "validation": validation, "reprefill": reprefill,
        "load_average": loads, "measure_s": measure_s, "command": COMMAND,
        "code_version": code_version(),
    }
    folder = opts.suite_dir(SUITE)
    files = [save_profile(profile, folder, calibration)]
    if opts.record:
        files.append(save_profile(profile, PROFILE_DIR, calibration))
    files += plot(rows, held_rows, profile, mtp_token_s, validation, folder / "llama_fit")
    goal = _fit_goal(validation, reprefill, opts.quick)
    logs_doc, logs_goal = _logs_part(opts, folder)
    files += [folder / "logs.json", folder / "logs.md"]
    data = {"profile": profile.name, "constants": asdict(profile), "calibration": calibration,
            "calibrate_logs": logs_doc,
            "traces": {d: [asdict(t) for t in v] for d, v in shapes.items()},
            "timed": {d: [asdict(t) for t in v] for d, v in timed.items()}}
    quick = " Quick run: not numbers to quote." if opts.quick else ""
    text = (f"llama-server (f32 GGUF of {opts.model}, {opts.threads} thread(s), f32 KV, no "
            f"flash attention, greedy), {plan.fit_prompts} fit prompts and "
            f"{plan.val_prompts} held-out ones of the held-out conversation set, answers "
            f"capped at {plan.tokens} tokens, draft {plan.draft}, {plan.repeat} interleaved "
            f"timed passes (median per request).{quick}"
            f"\n\n{table(profile, mtp_token_s, errors, validation, reprefill, loads)}")
    text += f"\n### One log's fit, other settings predicted\n\n{logs_doc['table']}"
    return SuiteResult(name=SUITE, data=data, table=text, goals=[goal, logs_goal], files=files,
                       sessions=[reprefill["session"]])
