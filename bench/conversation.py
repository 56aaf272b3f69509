"""The conversation suite (`specledger bench conversation`) as a script: a long first turn
and many short follow-ups, under the `legacy` and `truncate` EOG policies, on the sim at
Qwen3.5-27B / H200 scale (20 turns, 16,000-token answers) and on the real engine on this
CPU; per turn boundary re-prefill, restores and conversation cost.

    .venv/bin/python bench/conversation.py [--quick] [--out DIR] [--db PATH] [--threads N]

Writes <out>/conversation/results.json, results.md and the plots; prints the tables.
"""

import argparse
from pathlib import Path

from specledger.benchmarks import BenchOptions, run_suite
from specledger.benchmarks.common import DEFAULT_BENCH_DB, DEFAULT_OUT, goals_table


def main() -> None:
    """Parse the options, run the suite, print its tables and goals."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few short turns, for a smoke run")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder")
    p.add_argument("--db", default=DEFAULT_BENCH_DB, help="the benchmark's session log")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = p.parse_args()
    opts = BenchOptions(out=args.out, db=args.db, quick=args.quick, threads=args.threads)
    result = run_suite("conversation", opts)
    print(result.table)
    print()
    print(goals_table(result.goals))
    for path in result.files:
        print(path)


if __name__ == "__main__":
    main()
