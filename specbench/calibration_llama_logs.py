"""`specledger calibrate`'s check on this machine: one llama-server -v log fitted, the
decode tokens/s of the other logs of the same build predicted from their own rounds.

Each setting (a drafter chain and a draft size) runs `repeat` fresh verbose servers over
the same prompts; its measured tokens/s is the median over runs of print_timing's eval
tokens over eval seconds, the runs' range its noise. A fit log is the median run of its
setting (by tokens/s); every other setting is predicted from the fit's terms and that
setting's first log's rounds (greedy: every run of a setting has the same rounds).
Four fits, because a log only holds the costs it paid: the recommended one, a draft-mtp
server under `--spec-draft-p-min` (specbench/calibration_llama_recipe.py: plain rounds and
verify batches of every size beside the MTP head's drafting, in one log), then an n-gram
log (checkpoints in host memory: save and restore), a draft-mtp log (per-token recurrent
states, `n_rs_seq`: the MTP head's cost per drafted token, at one draft size) and the chain
of both (n-gram and MTP rounds of several sizes, per-token states). A prediction across
that line charges the terms the fit never saw at 0 (an MTP head the log never ran: its
share of the forward by the model's shape) and is shown as such: it is what `calibrate`
cannot know from one log. Each fit times a model drafter's call and its pass after each
forward apart from the rest of its round and takes the per-token cost from the prompt
lines where its rounds cannot separate it (adapters/llama/logfit.py); each miss is listed
with what the logs say about it (specbench/calibration_llama_misses.py).

`python -m specbench.calibration_llama_logs [--quick] [--refit] [--device cuda] [--repeat N]
[--out DIR]` runs it alone (`--refit`: on the logs the last run left, no server started;
`--device cuda`: the build's CUDA server, its logs kept apart) and writes
`DIR/logs.{json,md}` (default: the checkout's `bench/results/calibration_llama`);
`bench calibration --backend llama` runs it after its own fit.
"""

import argparse
import functools
import json
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from adapters.llama.log.sources import read_log
from adapters.llama.logclock import LogClock, log_clock
from adapters.llama.logfit import LogFit, fit_log, measured_tok_s, predict_tok_s
from engine.config import RunConfig
from engine.files import write_file
from specbench.calibration_llama_measure import load_average, server_options
from specbench.calibration_llama_misses import (
    Miss,
    line_gap_s,
    miss_reasons,
    misses_text,
)
from specbench.calibration_llama_recipe import DRAFT, P_MIN, recipe_flags
from specbench.common import md_table, server_logs

BAND = 0.15


@dataclass(frozen=True)
class Setting:
    """A server's drafter chain (ours), draft size and the MTP head's `--spec-draft-p-min`
    (None: llama.cpp's default, every round drafts the full size)."""

    drafter: str
    draft: int
    p_min: float | None = None

    @property
    def label(self) -> str:
        """How tables name it."""
        if self.drafter == "none":
            return self.drafter
        p_min = "" if self.p_min is None else f" p-min {self.p_min:g}"
        return f"{self.drafter} k={self.draft}{p_min}"


RECIPE = Setting("mtp", DRAFT, P_MIN)
"""The recommended fit log (specbench/calibration_llama_recipe.py)."""
FITS = (RECIPE, Setting("ngram-mod", 8), Setting("mtp", 4), Setting("ngram-mod,mtp", 4))
OTHERS = (Setting("none", 8), Setting("ngram-mod", 4), Setting("ngram-simple", 8),
          Setting("mtp", 2), Setting("mtp", 8))


@dataclass(frozen=True)
class Plan:
    """Prompts per server, the answer cap, runs per setting."""

    prompts: int
    tokens: int
    repeat: int


# a server is seconds; the median of 9 runs outvotes the stalls of a machine shared with
# another job (one run to the next moves by up to 2x there)
FULL = Plan(prompts=3, tokens=96, repeat=9)
QUICK = Plan(prompts=1, tokens=16, repeat=1)


def log_paths(s: Setting, logs: Path, repeat: int) -> list[Path]:
    """Where the runs of setting `s` write their logs."""
    p_min = "" if s.p_min is None else f"-p{s.p_min:g}"
    return [logs / f"{s.drafter}-k{s.draft}{p_min}-{i}.log" for i in range(repeat)]


def run_setting(s: Setting, model: str, prompts: list[list[int]], plan: Plan, threads: int,
                log: Path, device: str = "cpu") -> None:
    """A fresh verbose server of setting `s` (the CUDA build's on `device` cuda) over every
    prompt, logging to `log`."""
    from adapters.llama.gguf_export import cached_gguf
    from adapters.llama.server import LlamaServer

    config = RunConfig(backend="torch", model=model, drafter=s.drafter, draft_max=s.draft,
                       max_answer_tokens=plan.tokens, audit=False, device=device)
    options = server_options(config, cached_gguf(model), threads)(s.drafter, True)
    extra = [] if s.p_min is None else recipe_flags(s.p_min)
    with LlamaServer(options, log, extra) as server:
        for p in prompts:
            server.client.complete(p, plan.tokens)


def _clock(path: Path) -> LogClock:
    return log_clock(read_log(path), str(path))


def median_run(runs: list[LogClock]) -> LogClock:
    """The run whose measured tokens/s is the median of its setting's (the lower middle
    one of an even count)."""
    return sorted(runs, key=measured_tok_s)[(len(runs) - 1) // 2]


def predictions(fits: dict[str, LogFit], clocks: dict[str, list[LogClock]]
                ) -> list[dict[str, Any]]:
    """Every setting's measured tokens/s (median of its runs, their range) beside each
    fit's prediction from the setting's first log (whose decode seconds it gives)."""
    rows = []
    for label, runs in clocks.items():
        measured = [measured_tok_s(c) for c in runs]
        med = statistics.median(measured)
        row: dict[str, Any] = {"setting": label, "runs": measured, "measured": med,
                               "noise": (max(measured) - min(measured)) / med,
                               "first_eval_s": sum(t.eval_s for t in runs[0].tasks)}
        for name, fit in fits.items():
            predicted = predict_tok_s(fit, runs[0])[1]
            row[name] = {"predicted": predicted, "error": predicted / med - 1,
                         "fitted_on_it": label == name}
        rows.append(row)
    return rows


def table(rows: list[dict[str, Any]], fits: list[str]) -> str:
    """Measured against predicted tokens/s, each fit a column."""
    def cell(r: dict[str, Any], f: str) -> str:
        p = r[f]
        mark = " (fit log)" if p["fitted_on_it"] else (
            "" if abs(p["error"]) <= BAND else " **out**")
        return f"{p['predicted']:.0f} ({100 * p['error']:+.1f}%){mark}"
    return md_table(["setting", "llama-server tok/s: median (runs' spread)",
                     *[f"predicted from the {f} log" for f in fits]],
                    [(r["setting"], f"{r['measured']:.0f} ({100 * r['noise']:.0f}%)",
                      *[cell(r, f) for f in fits]) for r in rows])


def held_out_summary(rows: list[dict[str, Any]]) -> str:
    """Per fit: how many settings it never saw it predicts within `BAND`."""
    fits = [k for k in rows[0] if isinstance(rows[0][k], dict)]
    parts = []
    for f in fits:
        held = [r[f] for r in rows if not r[f]["fitted_on_it"]]
        parts.append(f"{f} log: {sum(abs(p['error']) <= BAND for p in held)}/{len(held)}")
    return ", ".join(parts)


def run(model: str, folder: Path, quick: bool, threads: int = 1, log: Any = print,
        refit: bool = False, device: str = "cpu", repeat: int | None = None
        ) -> dict[str, Any]:
    """Run every setting `repeat` times (default: the plan's; `refit`: read the logs a run
    before left) on `device`'s build, fit the fit logs, predict the rest; write
    `folder`/logs.{json,md}."""
    from engine.hybrid.loader import load_checkpoint
    from specbench.llama_runs import session_prompts

    plan = QUICK if quick else FULL
    plan = plan if repeat is None else replace(plan, repeat=repeat)
    config = RunConfig(backend="torch", model=model, slots=plan.prompts, turns=1, seed=1,
                       max_answer_tokens=plan.tokens, audit=False)
    prompts = session_prompts(config, load_checkpoint(model))
    logs = server_logs("calibration_llama_logs", ("quick" if quick else "full")
                       + ("-cuda" if device == "cuda" else ""))
    start, loads = time.perf_counter(), []
    settings = (*FITS, *OTHERS)
    for i in range(0 if refit else plan.repeat):  # settings interleaved: load drifts
        log(f"calibration llama logs: pass {i + 1}/{plan.repeat}, {len(settings)} servers "
            f"(load {load_average():.2f})")
        for s in settings:
            run_setting(s, model, prompts, plan, threads, log_paths(s, logs, plan.repeat)[i],
                        device)
        loads.append(load_average())
    if refit:  # the loads of the passes that wrote the logs
        loads = json.loads((logs / "loads.json").read_text())
    else:
        write_file(logs / "loads.json", json.dumps(loads) + "\n")
    paths = {s.label: log_paths(s, logs, plan.repeat) for s in settings}
    clocks = {k: [_clock(p) for p in ps] for k, ps in paths.items()}
    fit_clocks = {s.label: median_run(clocks[s.label]) for s in FITS}
    fit_paths = {k: next(p for p, x in zip(paths[k], clocks[k], strict=True) if x is c)
                 for k, c in fit_clocks.items()}
    fits = {k: fit_log(c) for k, c in fit_clocks.items()}
    rows = predictions(fits, clocks)
    gap = functools.cache(line_gap_s)  # a fit log is named in up to 8 misses: read it once
    misses = [Miss(f, r["setting"], r[f]["error"],
                   miss_reasons(fit_clocks[f], clocks[r["setting"]][0], r["noise"], BAND,
                                (gap(fit_paths[f]), gap(paths[r["setting"]][0]))))
              for r in rows for f in fits
              if not r[f]["fitted_on_it"] and abs(r[f]["error"]) > BAND]
    doc = {"plan": vars(plan), "model": model, "build": clocks[FITS[0].label][0].build,
           "device": device,
           "fits": {k: {n: vars(t) for n, t in f.terms.items()}
                    | {"residuals": vars(f.decode) if f.decode else None}
                    for k, f in fits.items()},
           "rows": rows, "misses": [vars(m) for m in misses], "load_average": loads,
           "seconds": time.perf_counter() - start}
    write_file(folder / "logs.json", json.dumps(doc, indent=2) + "\n")
    where = "CUDA build, every layer on the GPU" if device == "cuda" else f"{threads} thread(s)"
    text = (f"llama-server {doc['build']}, {model} (f32 GGUF), {where}, "
            f"{plan.prompts} prompt(s) x {plan.tokens} tokens, {plan.repeat} run(s) per "
            f"setting, interleaved, -v. Load average after each pass: "
            f"{', '.join(f'{x:.1f}' for x in loads)}.\n\n{table(rows, list(fits))}\n\n"
            f"Settings each fit never saw, within {100 * BAND:.0f}%: "
            f"{held_out_summary(rows)}.\n"
            + (f"\nWhat the logs say about each miss:\n\n{misses_text(misses)}\n"
               if misses else ""))
    write_file(folder / "logs.md", text)
    doc["table"] = text
    return doc


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The module's command line."""
    p = argparse.ArgumentParser(prog="python -m specbench.calibration_llama_logs",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="one prompt of 16 tokens, one run")
    p.add_argument("--refit", action="store_true", help="fit the logs the last run left")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: the build's CUDA server (`specledger llama build V --cuda`)")
    p.add_argument("--repeat", type=int, help=f"runs per setting (default: {FULL.repeat}, "
                                               f"quick {QUICK.repeat})")
    p.add_argument("--out", type=Path, help="results folder (default: the checkout's "
                                            "bench/results/calibration_llama)")
    args = p.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        p.error(f"--repeat: {args.repeat} is not a number of runs (1 or more)")
    return args


if __name__ == "__main__":
    from engine.config import SHIPPED_TARGET
    from specbench.record import recorded_results

    cli = parse_args()
    print(run(SHIPPED_TARGET, cli.out or recorded_results() / "calibration_llama", cli.quick,
              refit=cli.refit, device=cli.device, repeat=cli.repeat)["table"])
