"""GPU check and benchmark of the speckernels/ Triton kernels (issue 5). One command:

    python bench/kernels_gpu.py [--out DIR | --record] [--fla-wheel .gpu/whl]

On a CUDA machine it (1) checks every kernel against its torch reference at Qwen3.5-27B-like
shapes, (2) times, per GDN layer, the verify variants against a plain fused recurrent pass,
the torch reference and fla's fused_recurrent_gated_delta_rule (when its wheel is given or
installed), the per_token commit against a device-to-device copy measured in the same run,
and the input_replay commit against the checkpoint strategy's save + restore + forward at
every accepted count, and (3) writes results.json and results.md under --out (default
./out/bench/kernels_gpu; --record: the checkout's tracked bench/results/kernels_gpu).
Without CUDA it exits 2; ``--smoke-cpu`` runs the same code at toy shapes under the Triton
interpreter (the test suite does, so the script cannot rot unseen). Exit 1 when a check
fails (or, with --strict, a goal). Needs torch >= 2.4 and triton >= 3.0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run as a file from any directory


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line: shapes default to Qwen3.5-27B's GDN layers (48 x 32 value heads)."""
    from specbench.record import results_folder

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="results folder (./out/bench/kernels_gpu)")
    where.add_argument("--record", action="store_true",
                       help="write the checkout's tracked bench/results/kernels_gpu")
    p.add_argument("--batches", default="1,4,16,64", help="comma-separated batch sizes")
    p.add_argument("--drafts", default="4,8,16", help="draft lengths k (verify T = k + 1)")
    p.add_argument("--layers", type=int, default=48, help="GDN layers (one-launch commit)")
    p.add_argument("--heads", type=int, default=16, help="q/k heads")
    p.add_argument("--value-heads", type=int, default=32)
    p.add_argument("--head-dim", type=int, default=128, help="K = V")
    p.add_argument("--conv-taps", type=int, default=4, help="conv kernel size KW")
    p.add_argument("--conv-window", type=int, default=3, help="kept inputs S (KW-1 or KW)")
    p.add_argument("--budget-s", type=float, default=480.0, help="stop timing new batches after")
    p.add_argument("--fla-wheel", action="append", default=[], type=Path,
                   help="wheel file or folder of wheels (fla_core, einops) to import fla from")
    p.add_argument("--no-sweep", action="store_true", help="skip the tiling sweep")
    p.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed")
    p.add_argument("--smoke-cpu", action="store_true", help="toy shapes, Triton interpreter")
    args = p.parse_args(argv)
    if args.record and args.smoke_cpu:  # the tracked results are a GPU's numbers
        p.error("--record keeps a GPU run's numbers; --smoke-cpu's are not (drop one)")
    if args.out is None:
        args.out = results_folder(None, args.record) / "kernels_gpu"
    if args.smoke_cpu:
        args.batches, args.drafts, args.layers = "1,2", "2", 2
        args.heads, args.value_heads, args.head_dim = 1, 2, 8
        args.budget_s = 1e9
    args.batch_list = [int(x) for x in args.batches.split(",")]
    args.draft_list = [int(x) for x in args.drafts.split(",")]
    return args


def load_fla(wheels: list[Path]) -> tuple[object | None, str]:
    """fla's fused_recurrent_gated_delta_rule, or None and why not (it is optional)."""
    files = [w for p in wheels for w in (sorted(p.glob("*.whl")) if p.is_dir() else [p])]
    if files:
        target = Path(tempfile.mkdtemp(prefix="fla_wheels_"))
        for whl in files:  # pure-Python wheels: unpacking is installing
            zipfile.ZipFile(whl).extractall(target)
        sys.path.insert(0, str(target))
    try:
        from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule
    except Exception as exc:  # any import failure only means "no baseline"
        return None, f"unavailable: {type(exc).__name__}: {exc}"[:300]
    import importlib.metadata as md

    version = "?"
    for dist in ("fla-core", "flash-linear-attention"):
        try:
            version = md.version(dist)
            break
        except md.PackageNotFoundError:
            continue
    return fused_recurrent_gated_delta_rule, f"fla {version}"


def main(argv: list[str] | None = None) -> int:
    """Run checks and timings, write the reports; see the module docstring for exit codes."""
    args = parse_args(argv)
    if args.smoke_cpu:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
    else:
        os.environ.pop("TRITON_INTERPRET", None)  # a GPU run must compile, not interpret
    import torch

    if not args.smoke_cpu and not torch.cuda.is_available():
        msg = ("kernels_gpu: no CUDA device (torch.cuda.is_available() is False); run this on "
               "the GPU machine, or pass --smoke-cpu for a CPU dry run")
        print(msg, file=sys.stderr)
        return 2
    from specbench.kernels import measure as kernels_measure
    from specbench.kernels import report as reporting

    fla, fla_note = (None, "skipped on CPU") if args.smoke_cpu else load_fla(args.fla_wheel)
    started = time.perf_counter()
    report = kernels_measure.run(args, fla=fla, fla_note=fla_note)
    report["meta"]["wall_s"] = round(time.perf_counter() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(report, indent=2, default=str))
    markdown = reporting.render_markdown(report)
    (args.out / "results.md").write_text(markdown)
    print(markdown)
    print(f"kernels_gpu: wrote {args.out / 'results.json'} and results.md")
    failed = [c["name"] for c in report["checks"] if not c["ok"] and not c.get("baseline")]
    missed = [name for name, g in report["goals"].items() if g.get("ok") is False]
    if failed:
        print(f"kernels_gpu: FAILED checks: {', '.join(failed)}", file=sys.stderr)
        return 1
    if missed and args.strict:
        print(f"kernels_gpu: missed goals: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
