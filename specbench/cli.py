"""`specledger bench cli`: how long the `specledger` command takes to start, as a user
runs it: `--help`, and `sessions`, `show` and `postmortem` on a small ledger, each a whole
process (the interpreter's start included, and timed alone beside them), again and again.

The parser imports only what declares the commands' arguments; a command's work (SQLAlchemy,
rich, the engine, networkx) loads when that command runs (docs/architecture.md). The goals
are the wall seconds of the median run. The machine's load average is recorded beside them:
on a shared machine a busy neighbour slows every process alike.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.errors import BackendError
from specbench.common import BenchOptions, Goal, SuiteResult, md_table

SUITE = "cli"
COMMAND = "specledger bench cli"
FULL_RUNS, QUICK_RUNS = 15, 3
GOALS_S = {"specledger --help": 0.2, "specledger sessions": 0.5, "specledger show 1": 0.5}
"""The issue's goals (#43): the wall seconds of each whole process, median of the runs."""


@dataclass(frozen=True)
class Timed:
    """One command's runs: the median and fastest wall seconds of a whole process."""

    command: str
    runs: int
    median_s: float
    min_s: float


def _time(name: str, argv: list[str], runs: int, cwd: Path) -> Timed:
    """Run the process `argv` `runs` times, each to its end; its median and fastest."""
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
        seconds.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise BackendError(f"{name} failed ({done.returncode}): "
                               f"{done.stderr.decode()[-500:]}")
    return Timed(name, runs, statistics.median(seconds), min(seconds))


def _command(argv: list[str], db: str | None, runs: int, cwd: Path) -> Timed:
    """`specledger ARGV [--db DB]`, named without the temporary ledger's path."""
    extra = [] if db is None else ["--db", db]
    return _time(f"specledger {' '.join(argv)}",
                 [sys.executable, "-m", "specledger", *argv, *extra], runs, cwd)


def run(opts: BenchOptions) -> SuiteResult:
    """Record one sim session, then time the commands against its ledger."""
    from engine.config import RunConfig
    from specledger.api import run_session

    runs = QUICK_RUNS if opts.quick else FULL_RUNS
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        db = str(Path(tmp) / "cli.db")
        run_session(RunConfig(backend="sim", turns=2, seed=opts.seed), db)
        load_before = os.getloadavg()[0]
        # The interpreter alone: what no command can take less than, on this machine now.
        timed = [_time("python -c pass", [sys.executable, "-c", "pass"], runs, Path(tmp)),
                 _command(["--help"], None, runs, Path(tmp)),
                 *(_command(argv, db, runs, Path(tmp))
                   for argv in (["sessions"], ["show", "1"], ["postmortem", "1"]))]
        load_after = os.getloadavg()[0]
    rows = [[f"`{t.command}`", f"{t.median_s:.3f} s", f"{t.min_s:.3f} s",
             f"{GOALS_S[t.command]} s" if t.command in GOALS_S else ""] for t in timed]
    table = md_table(["command", "median", "fastest", "goal"], rows) + (
        f"\n\n{runs} runs of each, whole processes on a ledger of one sim session; load "
        f"average {load_before:.1f} before, {load_after:.1f} after.")
    goals = [Goal(f"`{t.command}` start", f"< {GOALS_S[t.command]} s",
                  f"{t.median_s:.3f} s (median of {t.runs})", t.median_s < GOALS_S[t.command],
                  COMMAND) for t in timed if t.command in GOALS_S]
    data = {"runs": runs, "load_average": [load_before, load_after],
            "timed": [asdict(t) for t in timed]}
    return SuiteResult(SUITE, data, table, goals=goals)
