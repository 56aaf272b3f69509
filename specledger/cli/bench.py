"""`specledger bench [SUITE ...]`: run benchmark suites, print their tables, keep the
goals table of every suite measured so far in `<out>/goals.md`.

The suites live above the library, in `specbench`; this command is the library's only way
in, and imports them only inside its functions.
"""

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.llama.server.paths import DEFAULT_BUILD
from engine.config import SHIPPED_DRAFT, SHIPPED_TARGET
from engine.errors import ConfigError
from specledger.cli.options import add_common

if TYPE_CHECKING:
    from specbench import Goal


def run(args: argparse.Namespace) -> int:
    """Run the named suites (all when none is named) and write their results."""
    from rich.markdown import Markdown

    from engine.files import write_file
    from specbench import SUITES, BenchOptions, run_suite
    from specbench.common import goals_table
    from specbench.record import results_folder
    from specledger.views import output

    out = results_folder(args.out, args.record)
    opts = BenchOptions(out=out, db=args.db or str(out / "bench.db"), quick=args.quick,
                        record=args.record, threads=args.threads, model=args.model,
                        draft_model=args.draft_model, seed=args.seed, device=args.device,
                        backend=args.backend, llama_build=args.llama_build)
    names = args.suites or list(SUITES)
    unknown = [n for n in names if n not in SUITES]
    if unknown:  # before any suite runs: a typo must not cost the suites before it
        raise ConfigError(f"bench: unknown suite '{unknown[0]}' (known: {', '.join(SUITES)})")
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for name in names:
        opts.log(f"suite {name}{' (quick)' if opts.quick else ''}")
        results.append(run_suite(name, opts))
    goals = collect_goals(out)
    write_file(out / "goals.md", "# Goals\n\n" + goals_table(goals) + "\n")
    if args.json:
        output.emit_json({
            "db": opts.db,
            "suites": {r.name: {"files": [str(f) for f in r.files], "sessions": r.sessions,
                                "goals": [g.to_dict() for g in r.goals], **r.data}
                       for r in results},
            "goals": [g.to_dict() for g in goals],
        })
        return 0
    for r in results:
        output.console.print(Markdown(f"## {r.name}\n\n{r.table}"))
        output.console.print(f"wrote {', '.join(str(f) for f in r.files)}")
    output.console.print(Markdown("## goals\n\n" + goals_table(goals)))
    output.console.print(f"sessions recorded in {opts.db}; goals in {out / 'goals.md'}")
    return 0


def collect_goals(out: Path) -> "list[Goal]":
    """The goals of every suite whose results lie under `out` (measured now or before)."""
    from specbench import SUITES, Goal

    goals: list[Goal] = []
    for name in SUITES:
        path = out / name / "results.json"
        if not path.exists():
            continue
        doc: dict[str, Any] = json.loads(path.read_text())
        goals += [Goal(**g) for g in doc.get("goals", [])]
    return goals


def add_parser(sub: Any) -> None:
    """The `bench` subcommand's options."""
    from specbench import SUITES
    from specbench.record import add_out_flags

    p = sub.add_parser("bench",
                       help="measure: conversation cost, rollback strategies, drafters, "
                            "recorder cost, sim calibration, batched throughput, three "
                            "engines side by side",
                       description="Run benchmark suites; their sessions go to --db "
                                   "(default: <out>/bench.db), their results under --out "
                                   "(default: ./out/bench), or with --record into the "
                                   "checkout's tracked bench/results.")
    # No argparse `choices`: with nargs="*" it rejects the empty default (Python 3.11).
    p.add_argument("suites", nargs="*", metavar="SUITE",
                   help=f"one or more of {', '.join(SUITES)} (default: all)")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes: checks that everything runs; not numbers to quote")
    add_out_flags(p)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="torch backend's device (auto: CUDA when torch sees one)")
    p.add_argument("--backend", choices=["torch", "llama"], default="torch",
                   help="calibration: fit the sim to our torch backend or to llama.cpp's "
                        "llama-server (make llama)")
    p.add_argument("--llama-build", default=DEFAULT_BUILD, metavar="VERSION",
                   help="the llama.cpp build the llama suites run, by llama-cpp-python "
                        f"version (default: {DEFAULT_BUILD}; `specledger llama builds`)")
    p.add_argument("--model", default=SHIPPED_TARGET, help="torch: target checkpoint")
    p.add_argument("--draft-model", default=SHIPPED_DRAFT, help="torch: draft checkpoint")
    p.add_argument("--seed", type=int, default=0)
    add_common(p, db_default=None, db_help="path or SQLAlchemy URL (default: <out>/bench.db, "
                                           "beside the results it produced)")
    p.set_defaults(run=run)
