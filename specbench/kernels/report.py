"""Goal verdicts and the markdown report of the GPU benchmark (pure Python over the dict)."""

from __future__ import annotations

PER_TOKEN_MAX_RATIO = 1.2  # per_token verify vs a plain fused recurrent pass
COMMIT_MIN_COPY_FRACTION = 0.7  # commit bandwidth vs device-to-device copy


def checkpoint_ms(parts: dict, k: int, j: int) -> float:
    """checkpoint strategy's per-layer state cost when j of k drafts are accepted.

    It saves every round; on a partial accept it restores and runs the forward (conv +
    recurrence) over the j + 1 accepted positions. A full accept needs neither.
    """
    rollback = restore_forward_ms(parts, j) if j < k else 0.0
    return parts["save_ms"] + rollback


def restore_forward_ms(parts: dict, j: int) -> float:
    """checkpoint's restore + forward over the j + 1 accepted positions (partial accept)."""
    return parts["restore_ms"] + parts["forward_ms"][j + 1]


def input_replay_ms(parts: dict, k: int, j: int) -> float:
    """input_replay commit with ping-pong slots: replay on a partial accept; a full accept
    keeps the spare slot the verify committed into, a host-side index swap (0 device ms)."""
    return parts["replay_ms"][j] if j < k else 0.0


def evaluate_goals(report: dict) -> dict:
    """The issue's three goals, each with per-shape rows and an overall ``ok``."""
    parts = {p["batch"]: p for p in report["strategy_parts"]}
    copy = report["copy"]["gbps"]
    verify_rows, commit_rows, replay_rows = [], [], []
    for case in report["cases"]:
        ms = case["verify"]["ms"]
        tilings = case["verify"]["tilings"]
        best_pt = min((t["per_token_ms"] for t in tilings), default=ms["per_token"])
        best_pl = min((t["plain_ms"] for t in tilings), default=ms["plain"])
        verify_rows.append({
            "batch": case["batch"], "draft": case["draft"],
            "ratio": ms["per_token"] / ms["plain"],
            "ratio_best_tiling": min(best_pt, ms["per_token"]) / min(best_pl, ms["plain"]),
            "ratio_vs_fla": ms["per_token"] / ms["fla"] if "fla" in ms else None,
        })  # fmt: skip
        p, k = parts[case["batch"]], case["draft"]
        literal = [restore_forward_ms(p, j) / p["replay_ms"][j] for j in range(k)]
        replay_rows.append({
            "batch": case["batch"], "draft": k,
            "min_speedup_vs_restore_forward": min(literal, default=None),
            "cheaper_than_checkpoint_every_j": all(
                input_replay_ms(p, k, j) < checkpoint_ms(p, k, j) for j in range(k + 1)),
            "in_place_min_speedup_vs_checkpoint": min(
                checkpoint_ms(p, k, j) / p["replay_ms"][j] for j in range(k + 1)),
        })  # fmt: skip
    for p in report["strategy_parts"]:
        c = p["commit_all_layers"]
        commit_rows.append({"batch": p["batch"], "copy_fraction": c["gbps"] / copy,
                            "same_bytes_copy_fraction": c["gbps"] / c["same_bytes_copy"]["gbps"]})
    return {
        "per_token_verify_within_1.2x_plain": {
            "ok": all(r["ratio"] <= PER_TOKEN_MAX_RATIO for r in verify_rows), "rows": verify_rows},
        "commit_at_least_70pct_copy_bandwidth": {
            "ok": all(r["copy_fraction"] >= COMMIT_MIN_COPY_FRACTION for r in commit_rows),
            "rows": commit_rows},
        "input_replay_cheaper_than_checkpoint_every_j": {
            "ok": all(r["cheaper_than_checkpoint_every_j"]
                      and (r["min_speedup_vs_restore_forward"] or 2.0) > 1.0
                      for r in replay_rows),
            "rows": replay_rows},
    }  # fmt: skip


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    """A GitHub markdown table; floats get 3 significant digits."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.3g}"
        return "" if v is None else str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return [*lines, ""]


def render_markdown(report: dict) -> str:
    """Human summary: environment, checks, verify, commit, strategies, goals."""
    meta, copy, goals = report["meta"], report["copy"], report["goals"]
    out = ["# speckernels/ on GPU: checks and timings", ""]
    out += [f"- device: {meta['device']}; torch {meta['torch']}, triton {meta['triton']}; "
            f"{meta['fla']} (mode {meta.get('fla_mode')})",
            f"- shape: {meta['shape']} (conv channels {meta['channels']})",
            f"- {meta['timing']}; per GDN layer unless noted; wall {meta.get('wall_s')} s",
            f"- device-to-device copy: {copy['gbps']:.1f} GB/s (read+write of "
            f"{copy['bytes'] / 2**30:.2f} GiB in {copy['ms']:.3f} ms)"]  # fmt: skip
    if meta.get("skipped_batches_over_budget"):
        out.append(f"- skipped (time budget): batches {meta['skipped_batches_over_budget']}")
    out += ["", "## Goals", ""]
    out += _table(["goal", "met"], [[name, g["ok"]] for name, g in goals.items()])
    out += ["## Checks (relative error vs torch reference)", ""]
    out += _table(["check", "rel err", "tol", "ok"],
                  [[c["name"], c["rel_err"], c["tol"], c["ok"]] for c in report["checks"]])
    out += ["## Verify (ms per layer; ratio = per_token / plain)", ""]
    rows = []
    by_shape = {(r["batch"], r["draft"]): r for r in goals["per_token_verify_within_1.2x_plain"]
                ["rows"]}  # fmt: skip
    for c in report["cases"]:
        ms, bw = c["verify"]["ms"], c["verify"]["gbps"]
        g = by_shape[(c["batch"], c["draft"])]
        rows.append([c["batch"], c["draft"], ms["plain"], ms["per_token"], g["ratio"],
                     g["ratio_best_tiling"], ms["deferred"], ms["pingpong"], ms.get("fla"),
                     ms["torch_ref"], bw["plain"], bw["per_token"],
                     bw["per_token"] / copy["gbps"]])  # fmt: skip
    out += _table(["B", "k", "plain", "per_token", "ratio", "ratio best tiling", "deferred",
                   "to spare slot", "fla", "torch ref", "plain GB/s", "per_token GB/s",
                   "per_token of copy"], rows)  # fmt: skip
    out += ["## Commit (per_token): one launch, whole batch", ""]
    rows = [[c["batch"], c["draft"], c["commit_layer"]["ms"], c["commit_layer"]["gbps"],
             c["commit_layer"]["gbps"] / copy["gbps"]] for c in report["cases"]]  # fmt: skip
    out += _table(["B", "k", "one layer ms", "GB/s", "of copy"], rows)
    rows = []
    for p in report["strategy_parts"]:
        c = p["commit_all_layers"]
        best = min(c["tilings"], key=lambda t: t["ms"]) if c["tilings"] else {}
        rows.append([p["batch"], c["ms"], c["gbps"], c["gbps"] / copy["gbps"],
                     c["gbps"] / c["same_bytes_copy"]["gbps"],
                     f"{best.get('block')}/{best.get('num_warps')}: {best.get('ms', 0):.3g}"])
    out += _table([f"B (all {meta['shape']['layers']} layers)", "ms", "GB/s", "of copy",
                   "of same-bytes copy", "best BLOCK/warps: ms"], rows)  # fmt: skip
    out += _strategy_section(report)
    out += ["## Conv update (ms per layer)", ""]
    names = ("plain", "per_token", "deferred", "pingpong", "torch_ref")
    rows = [[c["batch"], c["draft"], *(c["conv"]["ms"][n] for n in names)]
            for c in report["cases"]]  # fmt: skip
    out += _table(["B", "k", *names], rows)
    return "\n".join(out)


def _strategy_section(report: dict) -> list[str]:
    """Commit cost by accepted count, and whole-round state cost over all layers."""
    parts = {p["batch"]: p for p in report["strategy_parts"]}
    layers = report["meta"]["shape"]["layers"]
    out = ["## input_replay vs checkpoint commit (ms per layer, by accepted drafts j)", "",
           "checkpoint = save every round + (restore + conv/recurrent forward over j+1 "
           "positions when j < k). input_replay = replay of positions 0..j when j < k, and "
           "nothing when j = k (the verify committed into a spare slot: swap indices). "
           "in place = the same replay without spare slots (deferred verify), at every j.",
           ""]  # fmt: skip
    rows, totals = [], []
    for c in report["cases"]:
        p, k, v, cv = parts[c["batch"]], c["draft"], c["verify"]["ms"], c["conv"]["ms"]
        for j in range(k + 1):
            rf = restore_forward_ms(p, j) if j < k else None
            rows.append([c["batch"], k, j, checkpoint_ms(p, k, j), rf,
                         input_replay_ms(p, k, j), p["replay_ms"][j]])  # fmt: skip
        for j in sorted({0, k // 2, k}):
            totals.append([c["batch"], k, j,
                           layers * (v["plain"] + cv["plain"] + checkpoint_ms(p, k, j)),
                           layers * (v["per_token"] + cv["per_token"] + c["commit_layer"]["ms"]),
                           layers * (v["pingpong"] + cv["pingpong"] + input_replay_ms(p, k, j)),
                           layers * (v["deferred"] + cv["deferred"] + p["replay_ms"][j])])
    out += _table(["B", "k", "j", "checkpoint", "of which restore+forward", "input_replay",
                   "input_replay in place"], rows)  # fmt: skip
    out += [f"## Verify + commit per round, all {layers} GDN layers (ms, layer-extrapolated)", ""]
    out += _table(["B", "k", "j", "checkpoint", "per_token", "input_replay",
                   "input_replay in place"], totals)  # fmt: skip
    return out
