"""`specledger demo` (`make demo`): the #28049 amplification, recorded and drawn
(runs/demo.py)."""

import argparse
from pathlib import Path
from typing import Any

from specledger.cli.options import add_common


def add_parser(sub: Any) -> None:
    """The `demo` command."""
    p = sub.add_parser("demo", help="the #28049 amplification, shown")
    p.add_argument("--out-dir", default="out/demo", help="where the graphs go")
    p.add_argument("--seed", type=int, default=1)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Legacy vs truncate on the shipped model and a 27B-like profile, three turns."""
    from specledger.runs.demo import run_demo

    return run_demo(args.db, Path(args.out_dir), args.seed, args.json)
