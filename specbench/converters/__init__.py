"""`specledger bench converters`: a llama.cpp build is its GGUF converter too. Every built
build of the matrix exports the shipped target and draft model with its own
`convert_hf_to_gguf.py` (our vocabulary step, adapters/llama/gguf/convert.py); each export is
compared with the default build's (metadata keys, tensors, the largest difference of each
tensor's values, read by the default build's reader), and each build's llama-server answers
the same held-out prompts greedily on every GGUF it loads, against the default build's
server on the default build's GGUF.

A converter that changes what the model computes is an incident: a GGUF the default
server loads but answers differently on, or a build that answers differently on a GGUF.
Each is listed with the first differing prompt and token and what its GGUF changed.
The default build also exports the target without its MTP head (the file builds before
draft-mtp load). Unbuilt builds are skipped, said so. `quick`: the default build and one
other built one, the target only, two prompts.
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from adapters.llama.builds.matrix import MATRIX
from adapters.llama.gguf.compare import GgufDiff, compare_files
from adapters.llama.server.paths import DEFAULT_BUILD, build_hint, built, require_server
from engine.files import write_file
from specbench.common import BenchOptions, SuiteResult, md_table, server_logs
from specbench.converters.runs import (
    COLUMNS,
    MODELS,
    NO_MTP,
    Cell,
    Export,
    Outcome,
    base_model,
    export,
    first_difference,
    greedy_cell,
    held_out_prompts,
    torch_answers,
)

SUITE = "converters"
COMMAND = "specledger bench converters"


@dataclass(frozen=True)
class Plan:
    """Which builds export and serve, which models, how many prompts, answer length."""

    builds: tuple[str, ...]
    models: tuple[str, ...]
    prompts: int
    tokens: int


def plan_for(quick: bool, available: Sequence[str]) -> Plan:
    """Every built build, both models, 3 prompts of 32 tokens; quick: the default build
    and the newest other built one, the target, 2 prompts."""
    if quick:
        others = [b for b in reversed(MATRIX) if b in available and b != DEFAULT_BUILD]
        return Plan((DEFAULT_BUILD, *others[:1]), ("target",), prompts=2, tokens=32)
    return Plan(tuple(b for b in MATRIX if b in available), MODELS, prompts=3, tokens=32)


def verdict(cell: Cell, reference: Cell) -> str:
    """One cell against the reference: `same`, `differs at prompt P token T`, or what
    stopped it (`refused: ...`, `crashed: ...`)."""
    if cell.outcome is not Outcome.ANSWERED:
        return f"{cell.outcome.value}: {cell.error}"
    at = first_difference(reference.answers, cell.answers)
    text = "same" if at is None else f"**differs** at prompt {at[0]} token {at[1]}"
    return text if cell.same_prompt_ids else text + " (its template/tokenizer differ)"


def tensor_groups(names: Sequence[str]) -> str:
    """Tensor names, those of one block folded (`blk.8.* (13)`)."""
    groups: dict[str, int] = {}
    for n in names:
        parts = n.split(".")
        key = ".".join(parts[:2]) + ".*" if parts[0] == "blk" and len(parts) > 2 else n
        groups[key] = groups.get(key, 0) + 1
    return ", ".join(k if c == 1 else f"{k} ({c})" for k, c in groups.items())


def metadata_summary(diff: GgufDiff) -> str:
    """The keys a GGUF adds, removes and changes against the default's, values shown."""
    doc = diff.to_dict()
    parts = []
    if doc["keys_changed"]:
        parts.append("changed " + "; ".join(f"`{k}` {v}" for k, v in doc["keys_changed"].items()))
    if doc["keys_removed"]:
        parts.append("removed " + ", ".join(f"`{k}`" for k in doc["keys_removed"]))
    if doc["keys_added"]:
        parts.append("added " + ", ".join(f"`{k}` = {v}" for k, v in doc["keys_added"].items()))
    return "; ".join(parts) or "same"


def tensor_summary(diff: GgufDiff) -> str:
    """The tensors a GGUF adds, removes or lays out otherwise than the default's."""
    parts = []
    if diff.tensors_removed:
        parts.append(f"{len(diff.tensors_removed)} removed: {tensor_groups(diff.tensors_removed)}")
    if diff.tensors_added:
        parts.append(f"{len(diff.tensors_added)} added: {tensor_groups(diff.tensors_added)}")
    parts += [c.describe() for c in diff.layout_changed]
    return "; ".join(parts) or "same"


def run(opts: BenchOptions) -> SuiteResult:
    """Export, compare, answer; write results.json, results.md and converters.md."""
    require_server(DEFAULT_BUILD)
    available = [b for b in MATRIX if built(b)]
    plan = plan_for(opts.quick, available)
    skipped = {b: f"not built ({build_hint(b)})" for b in MATRIX if b not in available}
    for b, why in skipped.items():
        opts.log(f"{SUITE}: skipping llama.cpp {b}: {why}")
    checkpoints = {"target": opts.model, "draft": opts.draft_model}
    exports: dict[tuple[str, str], Export] = {}
    for b in plan.builds:
        for m in plan.models:
            opts.log(f"{SUITE}: exporting {m} with llama.cpp {b}'s converter")
            exports[b, m] = export(b, m, checkpoints[m])
    if "target" in plan.models:
        opts.log(f"{SUITE}: exporting the target without its MTP head (llama.cpp {DEFAULT_BUILD})")
        exports[DEFAULT_BUILD, NO_MTP] = export(DEFAULT_BUILD, NO_MTP, opts.model)
    diffs: dict[tuple[str, str], GgufDiff] = {}
    for (b, m), e in exports.items():
        reference = exports[DEFAULT_BUILD, base_model(m)].path
        if e.path is not None and reference is not None:
            diffs[b, m] = compare_files(reference, e.path)
    prompts = held_out_prompts(plan.prompts, opts.seed)
    logs = server_logs(SUITE)
    cells: dict[tuple[str, str, str], Cell] = {}
    for server in plan.builds:
        opts.log(f"{SUITE}: llama.cpp {server}'s server on {len(exports)} GGUF(s)")
        for (b, m), e in exports.items():
            if e.path is not None:
                cells[server, b, m] = greedy_cell(server, e, prompts, plan.tokens,
                                                  opts.threads, logs / f"{server}-on-{b}-{m}.log")
    truth = {m: torch_answers(checkpoints[m], prompts, plan.tokens) for m in plan.models}
    home = {m: cells.get((DEFAULT_BUILD, DEFAULT_BUILD, m)) for m in plan.models}
    reference_true = {m: c is not None and c.answers == truth[m] for m, c in home.items()}
    rows, incidents = _rows(plan, exports, diffs, cells)
    text = _text(plan, rows, cells, incidents, skipped, reference_true)
    path = opts.suite_dir(SUITE) / "converters.md"
    write_file(path, f"# {SUITE}\n\n{text}\n")
    data = {"plan": asdict(plan), "skipped": skipped, "default_build": DEFAULT_BUILD,
            "exports": {f"{b}/{m}": {"path": str(e.path) if e.path else None,
                                     "error": e.error} for (b, m), e in exports.items()},
            "diffs": {f"{b}/{m}": d.to_dict() for (b, m), d in diffs.items()},
            "cells": [c.to_dict() for c in cells.values()], "rows": rows,
            "incidents": incidents, "torch_answers": {m: [list(a) for a in t]
                                                      for m, t in truth.items()},
            "reference_is_torch": reference_true}
    return SuiteResult(SUITE, data, text, files=[path])


def _rows(plan: Plan, exports: dict[tuple[str, str], Export],
          diffs: dict[tuple[str, str], GgufDiff], cells: dict[tuple[str, str, str], Cell]
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One row per build and model; the incidents (answered, but not as the reference)."""
    rows, incidents = [], []
    for (b, m), e in exports.items():
        ref = cells.get((DEFAULT_BUILD, DEFAULT_BUILD, base_model(m)))
        diff = diffs.get((b, m))
        row: dict[str, Any] = {"build": b, "model": m, "export_error": e.error}
        if diff is not None:
            row |= {"metadata": metadata_summary(diff), "tensors": tensor_summary(diff),
                    "max_abs_diff": diff.max_abs_diff}
        for column, key in (("default_server", (DEFAULT_BUILD, b, m)), ("own_server", (b, b, m)),
                            ("on_default_gguf", (b, DEFAULT_BUILD, m))):
            cell = cells.get(key)
            row[column] = verdict(cell, ref) if cell and ref else "-"
        rows.append(row)
    for (server, b, m), cell in cells.items():
        ref = cells.get((DEFAULT_BUILD, DEFAULT_BUILD, base_model(m)))
        at = first_difference(ref.answers, cell.answers) if (
            ref and cell.outcome is Outcome.ANSWERED) else None
        if ref is not None and at is not None:
            diff = diffs.get((b, m))
            incidents.append({
                "server": server, "gguf_build": b, "model": m, "prompt": at[0],
                "token": at[1], "expected": ref.answers[at[0]][at[1]:at[1] + 4],
                "got": cell.answers[at[0]][at[1]:at[1] + 4],
                "gguf_changes": metadata_summary(diff) if diff else "-"})
    return rows, incidents


def _text(plan: Plan, rows: list[dict[str, Any]], cells: dict[tuple[str, str, str], Cell],
          incidents: list[dict[str, Any]], skipped: dict[str, str],
          reference_true: dict[str, bool]) -> str:
    """converters.md: the per-build table, the full answer matrix, the incidents."""
    head = (f"Each build's converter exported {', '.join(plan.models)}; compared with "
            f"llama.cpp {DEFAULT_BUILD}'s export. Answers: {plan.prompts} held-out prompt(s), "
            f"greedy, {plan.tokens} tokens, no drafter, against llama.cpp {DEFAULT_BUILD}'s "
            f"server on its own GGUF, which answers as our torch engine on the checkpoint: "
            + ", ".join(f"{m} {'yes' if ok else '**NO**'}" for m, ok in reference_true.items())
            + ".")
    main = md_table(
        ["build", "model", "metadata vs default", "tensors vs default", "max abs diff",
         f"{DEFAULT_BUILD} server on it", "its server on it", f"its server on {DEFAULT_BUILD}'s"],
        [(r["build"], r["model"], r.get("metadata", r["export_error"] or "-"),
          r.get("tensors", "-"), f"{r['max_abs_diff']:.3g}" if "max_abs_diff" in r else "-",
          r["default_server"], r["own_server"], r["on_default_gguf"]) for r in rows])
    columns = sorted({(b, m) for _, b, m in cells},
                     key=lambda k: (COLUMNS.index(k[1]), MATRIX.index(k[0])))
    matrix = md_table(
        ["server \\ GGUF", *(f"{b} {m}" for b, m in columns)],
        [(s, *(_short(cells.get((s, b, m)),
                      cells.get((DEFAULT_BUILD, DEFAULT_BUILD, base_model(m))))
               for b, m in columns)) for s in plan.builds])
    found = [f"- llama.cpp {i['server']}'s server on {i['gguf_build']}'s {i['model']} GGUF: "
             f"prompt {i['prompt']} first differs at token {i['token']} (expected "
             f"{i['expected']}, got {i['got']}); the GGUF's metadata vs the default's: "
             f"{i['gguf_changes']}" for i in incidents] or ["- none"]
    refusals = [f"- {s} on {b} {m}: {c.outcome.value}: {c.error}"
                for (s, b, m), c in cells.items() if c.outcome is not Outcome.ANSWERED]
    unbuilt = [f"- {b}: {why}" for b, why in skipped.items()]
    return "\n".join([head, "", main, "", "Greedy answers, every server on every GGUF "
                      "(same / first differing prompt:token / refused):", "", matrix, "",
                      "Incidents (a server answered, but not as the reference):", "", *found,
                      *(["", "Refused or crashed (the server's last error line):", "",
                         *refusals] if refusals else []),
                      *(["", "Skipped:", "", *unbuilt] if unbuilt else [])])


def _short(cell: Cell | None, reference: Cell | None) -> str:
    if cell is None or reference is None:
        return "-"
    if cell.outcome is not Outcome.ANSWERED:
        return cell.outcome.value
    at = first_difference(reference.answers, cell.answers)
    return "same" if at is None else f"**{at[0]}:{at[1]}**"
