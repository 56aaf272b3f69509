"""What recording costs: events/s, projection speed, bytes per event, and the overhead of
recording on a sim run and on the real engine (`specledger bench recorder`).

    .venv/bin/python bench/recorder.py [--quick] [--out DIR] [--db PATH] [--threads N]

Writes <out>/recorder/results.json, results.md and the plot (PNG and SVG).
"""

import argparse
from pathlib import Path

from specledger.benchmarks import BenchOptions, run_suite
from specledger.benchmarks.common import DEFAULT_BENCH_DB, DEFAULT_OUT, goals_table


def main() -> None:
    """Run the suite and print its table and goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results folder")
    parser.add_argument("--db", default=DEFAULT_BENCH_DB, help="the benchmark's session log")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    result = run_suite("recorder", BenchOptions(out=args.out, db=args.db, quick=args.quick,
                                                threads=args.threads))
    print(result.table)
    print(goals_table(result.goals))
    print("wrote " + ", ".join(str(p) for p in result.files))


if __name__ == "__main__":
    main()
