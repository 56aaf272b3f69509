"""`specledger calibrate`'s cross-validation on this machine: every log a fit, every fit
predicting the decode tokens/s of every other setting of its build from that setting's
own rounds, each prediction inside the fit's reach or marked with why it is not.

Each setting (specbench/calibration/llama/capture.py: no drafter, draft-mtp at 2, 4 and 8
and the recipe's p-min server, ngram-mod at 4 and 8, ngram-simple, the ngram-mod,draft-mtp
chain) runs `repeat` fresh verbose servers of each build through the same held-out
conversations; its measured tokens/s is the median over runs of print_timing's eval
tokens over eval seconds, the runs' range its noise. Every run is a fit, and each pass's
fit of one setting predicts each setting's run of the same pass from that run's rounds:
the runs of one pass are recorded seconds apart, so a prediction and its measurement saw
the same load as near as a shared machine allows (one run to the next moves by up to 2x
under another job's load); a cell is the median over the passes. A
prediction that needs what the fit log never measured (adapters/llama/calibration/reach.py:
forwards of other sizes, a drafter it never ran, checkpoints, plain or speculative
rounds, another graph, another build) is marked with the reasons; the goal is every
prediction inside a fit's reach within `BAND`, and each miss is listed with what the logs
say about it (specbench/calibration/llama/misses.py).

`python -m specbench.calibration.llama.logs [--quick] [--refit] [--device cuda] [--repeat N]
[--builds V,V] [--out DIR]` runs it alone (`--refit`: on the logs the last run left, no
server started; `--device cuda`: the builds' CUDA servers, their logs kept apart) and
writes `DIR/logs.{json,md}` (default: the checkout's `bench/results/calibration_llama`);
`bench calibration --backend llama` runs it after its own fit.
"""

import argparse
import functools
import json
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapters.llama.calibration.clock import LogClock, log_clock
from adapters.llama.calibration.fit import LogFit, fit_log, measured_tok_s, predict_tok_s
from adapters.llama.calibration.reach import Beyond, Reach, outside, reach_of
from adapters.llama.errors import UnknownBuildError
from adapters.llama.log.sources import read_log
from adapters.llama.server.paths import DEFAULT_BUILD, check_build
from engine.config import RunConfig
from engine.files import write_file
from specbench.calibration.llama.capture import (
    FULL,
    QUICK,
    SETTINGS,
    Plan,
    conversations,
    log_paths,
    run_setting,
)
from specbench.calibration.llama.measure import load_average
from specbench.calibration.llama.misses import Miss, line_gap_s, miss_reasons, misses_text
from specbench.common import md_table, server_logs

BAND = 0.15
BUILDS = (DEFAULT_BUILD, "0.3.30")
"""The builds the suite logs: the default and the last before compute brackets (0.3.30
times no forward apart, only rounds and drafting)."""
MARKS = {Beyond.BUILD: "B", Beyond.SIZES: "S", Beyond.CONTEXT: "X", Beyond.DRAFTER: "D",
         Beyond.CHECKPOINTS: "C", Beyond.ROUNDS: "R", Beyond.GRAPH: "G"}
"""The letter a table cell carries for each reason it is outside the fit's reach."""


def _clock(path: Path) -> LogClock:
    return log_clock(read_log(path), str(path))


def median_run(runs: list[LogClock]) -> LogClock:
    """The run whose measured tokens/s is the median of its setting's (the lower middle
    one of an even count)."""
    return sorted(runs, key=measured_tok_s)[(len(runs) - 1) // 2]


def predictions(fits: dict[str, list[LogFit]], reaches: dict[str, Reach],
                clocks: dict[str, list[LogClock]]) -> list[dict[str, Any]]:
    """Every setting's measured tokens/s (median of its runs, their range) beside each
    fit's predictions: pass by pass, the fit of a setting's run predicting each setting's
    run of the same pass (recorded seconds apart, so on the same load as near as the
    machine allows) from that run's rounds; the cell is the median prediction and the
    median error of the passes, and why the prediction is outside the fit's reach (empty:
    inside)."""
    rows = []
    for label, runs in clocks.items():
        measured = [measured_tok_s(c) for c in runs]
        med = statistics.median(measured)
        row: dict[str, Any] = {"setting": label, "runs": measured, "measured": med,
                               "noise": (max(measured) - min(measured)) / med,
                               "first_eval_s": sum(t.eval_s for t in runs[0].tasks)}
        for name, passes in fits.items():
            predicted = [predict_tok_s(f, c)[1] for f, c in zip(passes, runs, strict=True)]
            errors = [p / m - 1 for p, m in zip(predicted, measured, strict=True)]
            own = label == name
            row[name] = {"predicted": statistics.median(predicted),
                         "error": statistics.median(errors), "errors": errors,
                         "fitted_on_it": own,
                         "outside": [] if own else [
                             {"beyond": w.beyond.value, "clause": w.clause}
                             for w in outside(reaches[name], runs[0])]}
        rows.append(row)
    return rows


def _cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every prediction of a setting its fit never saw."""
    fits = [k for k in rows[0] if isinstance(rows[0][k], dict)]
    return [r[f] for r in rows for f in fits if not r[f]["fitted_on_it"]]


def _mark(cell: dict[str, Any]) -> str:
    letters = sorted({MARKS[Beyond(w["beyond"])] for w in cell["outside"]})
    return f" †{''.join(letters)}" if letters else ""


def table(rows: list[dict[str, Any]], fits: list[str]) -> str:
    """Measured against predicted tokens/s, each fit a column; a prediction outside its
    fit's reach carries † and the letters of its reasons, a miss inside it **miss**."""
    def cell(r: dict[str, Any], f: str) -> str:
        p = r[f]
        mark = " (fit log)" if p["fitted_on_it"] else _mark(p) or (
            "" if abs(p["error"]) <= BAND else " **miss**")
        return f"{p['predicted']:.0f} ({100 * p['error']:+.1f}%){mark}"
    return md_table(["setting", "llama-server tok/s: median (runs' spread)",
                     *[f"from the {f} log" for f in fits]],
                    [(r["setting"], f"{r['measured']:.0f} ({100 * r['noise']:.0f}%)",
                      *[cell(r, f) for f in fits]) for r in rows])


def held_out_summary(rows: list[dict[str, Any]]) -> str:
    """How many predictions lie inside their fit's reach and how many of those are within
    `BAND`; how many are outside it (marked), and how many of those are within too."""
    cells = _cells(rows)
    inside = [c for c in cells if not c["outside"]]
    out = [c for c in cells if c["outside"]]
    near = sum(abs(c["error"]) <= BAND for c in inside)
    near_out = sum(abs(c["error"]) <= BAND for c in out)
    return (f"{len(cells)} predictions: {len(inside)} inside their fit's reach, {near} of "
            f"them within {100 * BAND:.0f}%; {len(out)} outside it (marked), {near_out} "
            "of them within")


def goal_met(doc: dict[str, Any]) -> bool:
    """Whether every prediction inside its fit's reach is within `BAND`, in every build."""
    return all(abs(c["error"]) <= BAND for b in doc["builds"].values()
               for c in _cells(b["rows"]) if not c["outside"])


def _passes_clause(errors: list[float]) -> str:
    """How far the passes' own predictions of one cell ran apart."""
    within = sum(abs(e) <= BAND for e in errors)
    return (f"pass by pass its error ran {100 * min(errors):+.0f}% to {100 * max(errors):+.0f}%"
            f" ({within} of {len(errors)} passes within {100 * BAND:.0f}%)")


def cross_validate(paths: dict[str, list[Path]]) -> dict[str, Any]:
    """Fit every run of every setting, predict every setting's run of the same pass, list
    the misses inside the fits' reach: one build's part of the results."""
    clocks = {k: [_clock(p) for p in ps] for k, ps in paths.items()}
    fits = {k: [fit_log(c) for c in runs] for k, runs in clocks.items()}
    typical = {k: median_run(runs) for k, runs in clocks.items()}
    where = {k: paths[k][clocks[k].index(c)] for k, c in typical.items()}
    reaches = {k: reach_of(c) for k, c in typical.items()}
    rows = predictions(fits, reaches, clocks)
    gap = functools.cache(line_gap_s)  # a fit log is named in many misses: read it once
    misses = [Miss(f, r["setting"], r[f]["error"],
                   (*miss_reasons(typical[f], typical[r["setting"]], r["noise"], BAND,
                                  (gap(where[f]), gap(where[r["setting"]]))),
                    _passes_clause(r[f]["errors"])))
              for r in rows for f in fits
              if not r[f]["fitted_on_it"] and not r[f]["outside"]
              and abs(r[f]["error"]) > BAND]
    first = next(iter(clocks.values()))[0]
    chosen = {k: fits[k][clocks[k].index(c)] for k, c in typical.items()}
    return {"banner": first.build, "rows": rows,
            "fits": {k: {"terms": {n: vars(t) for n, t in f.terms.items()},
                         "residuals": vars(f.residuals) if f.residuals else None,
                         "level": f.level, "knots": list(f.curve.knots),
                         "reach": reaches[k].to_dict(), "log": str(where[k])}
                     for k, f in chosen.items()},
            "misses": [vars(m) for m in misses]}


def capture(model: str, logs: Path, plan: Plan, threads: int, build: str, device: str,
            log: Any) -> list[float]:
    """`plan.repeat` passes of every setting's server (settings interleaved: load drifts)
    into `logs`; the load average after each pass."""
    from engine.hybrid.backend import template_for
    from engine.hybrid.loader import load_checkpoint

    config = RunConfig(backend="torch", model=model, slots=plan.prompts, turns=2, seed=1,
                       max_answer_tokens=plan.tokens, audit=False)
    checkpoint = load_checkpoint(model)
    talks, template = conversations(config, checkpoint), template_for(checkpoint.tokenizer)
    loads = []
    for i in range(plan.repeat):
        log(f"calibration llama logs ({build}): pass {i + 1}/{plan.repeat}, {len(SETTINGS)} "
            f"servers (load {load_average():.2f})")
        for s in SETTINGS:
            run_setting(s, model, talks, template, plan, threads,
                        log_paths(s, logs, plan.repeat)[i], device, build)
        loads.append(load_average())
    return loads


def _build_text(build: str, part: dict[str, Any]) -> str:
    rows, fits = part["rows"], list(part["fits"])
    loads = ", ".join(f"{x:.1f}" for x in part["load_average"])
    misses = [Miss(**m) for m in part["misses"]]
    return (f"### llama-server {build} ({part['banner']})\n\nLoad average after each pass: "
            f"{loads}.\n\n{table(rows, fits)}\n\n{held_out_summary(rows)}.\n"
            + (f"\nWhat the logs say about each miss inside a fit's reach:\n\n"
               f"{misses_text(misses)}\n" if misses else ""))


LEGEND = ("† marks a prediction outside its fit's reach, by what it needs that the fit log "
          "never measured: " + ", ".join(f"{v} {k.value}" for k, v in MARKS.items())
          + " (each reason in words in logs.json).")


def run(model: str, folder: Path, quick: bool, threads: int = 1, log: Any = print,
        refit: bool = False, device: str = "cpu", repeat: int | None = None,
        builds: tuple[str, ...] = BUILDS) -> dict[str, Any]:
    """Run every setting `repeat` times (default: the plan's; `refit`: read the logs a run
    before left) on each build's server for `device`, fit every run, predict every
    setting's run of the same pass; write `folder`/logs.{json,md}."""
    plan = QUICK if quick else FULL
    plan = plan if repeat is None else replace(plan, repeat=repeat)
    start = time.perf_counter()
    parts = {}
    for build in builds:
        logs = server_logs("calibration_llama_logs", ("quick" if quick else "full") + f"-{build}"
                           + ("-cuda" if device == "cuda" else ""))
        if refit:  # the loads of the passes that wrote the logs
            loads = json.loads((logs / "loads.json").read_text())
        else:
            loads = capture(model, logs, plan, threads, build, device, log)
            write_file(logs / "loads.json", json.dumps(loads) + "\n")
        paths = {s.label: log_paths(s, logs, plan.repeat) for s in SETTINGS}
        parts[build] = cross_validate(paths) | {"load_average": loads}
    doc = {"plan": vars(plan), "model": model, "device": device, "builds": parts,
           "seconds": time.perf_counter() - start}
    write_file(folder / "logs.json", json.dumps(doc, indent=2) + "\n")
    where = "CUDA builds, every layer on the GPU" if device == "cuda" else f"{threads} thread(s)"
    text = (f"{model} (f32 GGUF), {where}, {plan.prompts} conversation(s) of 2 turns x "
            f"{plan.tokens} tokens, {plan.repeat} run(s) per setting, interleaved, -v. Every "
            f"run is a fit; each column's fits predict every setting's run of the same pass "
            f"from its rounds, the cell the median over passes. {LEGEND}\n\n"
            + "\n".join(_build_text(b, p) for b, p in parts.items()))
    write_file(folder / "logs.md", text)
    doc["table"] = text
    return doc


def _builds(text: str) -> tuple[str, ...]:
    """`--builds`' comma-separated versions, each one of the matrix."""
    names = tuple(v for v in text.split(",") if v)
    for v in names:
        check_build(v)
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The module's command line."""
    p = argparse.ArgumentParser(prog="python -m specbench.calibration.llama.logs",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="one conversation of 48 tokens, one run")
    p.add_argument("--refit", action="store_true", help="fit the logs the last run left")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: the builds' CUDA servers (`specledger llama build V --cuda`)")
    p.add_argument("--repeat", type=int, help=f"runs per setting (default: {FULL.repeat}, "
                                               f"quick {QUICK.repeat})")
    p.add_argument("--builds", default=",".join(BUILDS),
                   help=f"llama.cpp builds, comma-separated (default: {','.join(BUILDS)})")
    p.add_argument("--out", type=Path, help="results folder (default: the checkout's "
                                            "bench/results/calibration_llama)")
    args = p.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        p.error(f"--repeat: {args.repeat} is not a number of runs (1 or more)")
    try:
        args.builds = _builds(args.builds)
    except UnknownBuildError as exc:
        p.error(f"--builds: {exc}")
    return args


if __name__ == "__main__":
    from engine.config import SHIPPED_TARGET
    from specbench.record import recorded_results

    cli = parse_args()
    print(run(SHIPPED_TARGET, cli.out or recorded_results() / "calibration_llama", cli.quick,
              refit=cli.refit, device=cli.device, repeat=cli.repeat, builds=cli.builds)["table"])
