"""A published GPU log's fit against what its author measured for the other setting.

99sono/DockerBuildFiles publishes two complete `docker logs` dumps of one DGX Spark (GB10,
128 GB unified memory) serving unsloth's Qwen3.6-27B-MTP UD-Q4_K_XL with llama.cpp's
`server-cuda13` image, at its default verbosity (no -v: no round is logged), one per
draft-mtp setting: `--spec-draft-n-max 2 --spec-draft-p-min 0.85` and `--spec-draft-n-max
3 --spec-draft-p-min 0.75` (the real-log corpus, shared/real-logs/llama-server: its README
names the files and the commit they come from). Its author's README
(inference-containers/llamacpp/qwen-3.6-27b-dgx-spark/README.md, "Performance Benchmarks")
tables both: n-max 3 at 16.83 tok/s for the first request and 14.90 for the second, n-max 2
at "~18-22" and "~21-22"; they are the print_timing of each log's first two requests. Each
log is fitted request by request (adapters/llama/calibration/taskfit.py) and predicts the
other log's requests from their own counts (rounds, drafts, context), marked where it needs what its
log never measured.

`python -m specbench.calibration.llama.public [--out DIR]` writes `DIR/public.{json,md}`
(default: the checkout's `bench/results/calibration_llama`).
"""

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from adapters.llama.calibration.taskfit import (
    TaskFit,
    TaskTiming,
    fit_tasks,
    predict_task_s,
    task_outside,
    task_timings,
)
from adapters.llama.log.sources import read_file
from engine.files import write_file
from specbench.common import md_table
from specbench.record import CHECKOUT, recorded_results

CORPUS = CHECKOUT.parent / "shared" / "real-logs" / "llama-server"
"""The real-log corpus beside the checkout (CI clones it there too)."""
PREFIX = "99sono-DockerBuildFiles-dgxspark-qwen36-27b-draftmtp-2026-05-19-"
LOGS = {"n-max 2, p-min 0.85": f"{PREFIX}a.log", "n-max 3, p-min 0.75": f"{PREFIX}b.log"}
AUTHOR = {"n-max 3, p-min 0.75": "16.83 and 14.90 tok/s (first and second request)",
          "n-max 2, p-min 0.85": "~18-22 and ~21-22 tok/s (first and second request)"}
"""The author's README table, as printed there."""


def _fit(setting: str, corpus: Path) -> tuple[list[TaskTiming], TaskFit, tuple[str, ...]]:
    run = read_file(corpus / LOGS[setting]).only()
    timings = task_timings(run)
    drafters = tuple(run.server.spec_types)
    return timings, fit_tasks(timings, drafters), drafters


def _requests(fit: TaskFit, timings: list[TaskTiming]) -> list[dict[str, Any]]:
    return [{"task": t.task, "tokens": t.tokens, "measured_tok_s": t.tokens / t.eval_s,
             "predicted_tok_s": t.tokens / (s := predict_task_s(fit, t)),
             "error": t.eval_s / s - 1} for t in timings]


def run(corpus: Path = CORPUS) -> dict[str, Any]:
    """Each setting's log fitted; its own requests and the other setting's predicted."""
    parts = {k: _fit(k, corpus) for k in LOGS}
    doc: dict[str, Any] = {"logs": {k: str(corpus / v) for k, v in LOGS.items()},
                           "author": AUTHOR, "fits": {}}
    for name, (timings, fit, _) in parts.items():
        other = next(k for k in LOGS if k != name)
        other_timings, _, other_drafters = parts[other]
        doc["fits"][name] = {
            "requests": len(timings), "knots": list(fit.curve.knots),
            "terms": {n: asdict(t) for n, t in fit.terms.items()},
            "draft_token_s": fit.draft_token_s, "contexts": fit.contexts,
            "own": _requests(fit, timings), "predicts": other,
            "other": _requests(fit, other_timings),
            "outside": [{"beyond": w.beyond.value, "clause": w.clause}
                        for w in task_outside(fit, other_timings, other_drafters)]}
    return doc


def text(doc: dict[str, Any]) -> str:
    """The comparison as markdown: per fit, the other setting's requests predicted."""
    out = []
    for name, f in doc["fits"].items():
        rows = [(r["task"], r["tokens"], f"{r['measured_tok_s']:.2f}",
                 f"{r['predicted_tok_s']:.2f}", f"{100 * r['error']:+.1f}%") for r in f["other"]]
        why = "; ".join(w["clause"] for w in f["outside"]) or "none"
        own = max(abs(r["error"]) for r in f["own"])
        out.append(f"### Fitted from the {name} log ({f['requests']} requests), predicting "
                   f"{f['predicts']}\n\nIts own requests within {100 * own:.1f}%. The "
                   f"author's table for {f['predicts']}: {doc['author'][f['predicts']]}.\n\n"
                   + md_table(["request", "decoded tokens", "measured tok/s (print_timing)",
                               "predicted tok/s", "error"], rows)
                   + f"\n\nOutside the fit's reach: {why}.\n")
    return "\n".join(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The module's command line."""
    p = argparse.ArgumentParser(prog="python -m specbench.calibration.llama.public",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="results folder (default: the checkout's "
                                            "bench/results/calibration_llama)")
    return p.parse_args(argv)


if __name__ == "__main__":
    cli = parse_args()
    folder = cli.out or recorded_results() / "calibration_llama"
    result = run()
    write_file(folder / "public.json", json.dumps(result, indent=2) + "\n")
    write_file(folder / "public.md", text(result))
    print(text(result))
