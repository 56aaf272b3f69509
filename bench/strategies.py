"""The rollback-strategy comparison suite (`specledger bench strategies`) as a script:
checkpoint vs per_token vs input_replay (and none) over acceptance x draft length, on the
sim's large profiles and on the real engine on this CPU.

    .venv/bin/python bench/strategies.py [--quick] [--out DIR] [--threads N]

Writes <out>/strategies/results.json, results.md and the plots; prints the tables.
"""

import argparse
from pathlib import Path

from specledger.benchmarks import BenchOptions, run_suite
from specledger.benchmarks.common import DEFAULT_BENCH_DB, DEFAULT_OUT, goals_table


def main() -> None:
    """Parse the options, run the suite, print its tables and goal."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a tiny grid, for a smoke run")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder")
    p.add_argument("--db", default=DEFAULT_BENCH_DB, help="the benchmark's session log")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = p.parse_args()
    opts = BenchOptions(out=args.out, db=args.db, quick=args.quick, threads=args.threads)
    result = run_suite("strategies", opts)
    print(result.table)
    print()
    print(goals_table(result.goals))
    for path in result.files:
        print(path)


if __name__ == "__main__":
    main()
