"""Suite `scale`: projection, postmortem, diff and `show` of very long sessions, in flat
memory.

A 1M-event session is analysed `repeat` times by each analysis (median wall time; CPU
seconds beside it, which a shared machine disturbs less), and a 10M-event session once by
each, for its peak memory. Every analysis runs in a fresh process (`worker.py`), so the
peak RSS is the analysis's own, interpreter and imports included. The sessions are SQLite
files grown from a real sim session (`session.py`). Needs about 2 GB of free disk for the 10M-event
SQLite file.
"""

import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.common import BenchOptions, Goal, SuiteResult, ledger_env, md_table
from specbench.scale.session import build
from specbench.scale.worker import Analysis

COMMAND = "specledger bench scale"
TIME_GOAL_S = 3.0  # projection and postmortem of the 1M-event session, each
SHOW_GOAL_S = 0.5  # `show` of the 1M-event session: its turn summaries, not its rounds
RSS_GOAL_MB = 500.0  # any analysis of the 10M-event session


@dataclass(frozen=True)
class Sizes:
    """The two sessions' lengths and the timed runs per analysis of the first."""

    timed: int
    large: int
    repeat: int


FULL = Sizes(timed=1_000_000, large=10_000_000, repeat=3)
QUICK = Sizes(timed=20_000, large=60_000, repeat=1)


def _worker(db: Path, session: int, what: Analysis) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "specbench.scale.worker",
                           str(db), str(session), what.value],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _session(tmp: Path, events: int, opts: BenchOptions) -> tuple[Path, int, int]:
    db = tmp / f"scale-{events}.db"
    opts.log(f"scale: building a {events:,}-event session")
    sid, n = build(db, events)
    return db, sid, n


def run(opts: BenchOptions) -> SuiteResult:
    """Build both sessions, run every analysis over them, report."""
    sizes = QUICK if opts.quick else FULL
    timed: dict[str, list[dict[str, Any]]] = {a.value: [] for a in Analysis}
    large: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        db, sid, n_timed = _session(Path(tmp), sizes.timed, opts)
        for i in range(sizes.repeat):  # interleaved: a slow spell hits every analysis
            for what in Analysis:
                opts.log(f"scale: {what.value} of {n_timed:,} events ({i + 1}/{sizes.repeat})")
                timed[what.value].append(_worker(db, sid, what))
        db.unlink()
        db, sid, n_large = _session(Path(tmp), sizes.large, opts)
        db_bytes = db.stat().st_size
        for what in Analysis:
            opts.log(f"scale: {what.value} of {n_large:,} events")
            large[what.value] = _worker(db, sid, what)
    summary = {name: {"wall_s": statistics.median(r["wall_s"] for r in runs),
                      "cpu_s": statistics.median(r["cpu_s"] for r in runs),
                      "walls": [r["wall_s"] for r in runs],
                      "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
                      "found": runs[0]["found"]} for name, runs in timed.items()}
    data = {"timed_events": n_timed, "large_events": n_large, "repeat": sizes.repeat,
            "timed": summary, "large": large, "large_db_bytes_per_event": db_bytes / n_large,
            "env": ledger_env()}
    return SuiteResult(name="scale", data=data, table=table(data),
                       goals=goals(data, opts.quick))


def table(data: dict[str, Any]) -> str:
    """The suite's markdown table."""
    rows = []
    for name, r in data["timed"].items():
        n = data["timed_events"]
        rows.append((name, f"{n:,}", f"{r['wall_s']:.2f} s (median of {data['repeat']})",
                     f"{r['cpu_s']:.2f} s", f"{n / r['wall_s']:,.0f}",
                     f"{r['peak_rss_mb']:.0f} MB"))
    for name, r in data["large"].items():
        n = data["large_events"]
        rows.append((name, f"{n:,}", f"{r['wall_s']:.1f} s", f"{r['cpu_s']:.1f} s",
                     f"{n / r['wall_s']:,.0f}", f"{r['peak_rss_mb']:.0f} MB"))
    return md_table(["analysis", "events", "wall", "CPU", "events/s", "peak RSS"], rows)


def goals(data: dict[str, Any], quick: bool) -> list[Goal]:
    """Three time goals at 1M events and the memory goal at 10M."""
    note = " (quick run: not to quote)" if quick else ""
    out = []
    for name, limit in ((Analysis.POSTMORTEM.value, TIME_GOAL_S),
                        (Analysis.PROJECTION.value, TIME_GOAL_S),
                        (Analysis.SHOW.value, SHOW_GOAL_S)):
        r = data["timed"][name]
        out.append(Goal(
            name=f"{name} of a {data['timed_events']:,}-event session",
            target=f"<= {limit:g} s",
            measured=f"{r['wall_s']:.2f} s (median of {data['repeat']}: "
                     f"{min(r['walls']):.2f}...{max(r['walls']):.2f} s; CPU {r['cpu_s']:.2f} s)"
                     f"{note}",
            met=r["wall_s"] <= limit, command=COMMAND))
    peak = max(data["large"].values(), key=lambda r: r["peak_rss_mb"])
    out.append(Goal(
        name=f"projection, postmortem, diff and show of a {data['large_events']:,}-event "
             "session in flat memory",
        target=f"peak RSS < {RSS_GOAL_MB:.0f} MB",
        measured=", ".join(f"{n} {r['peak_rss_mb']:.0f} MB" for n, r in data["large"].items())
                 + note,
        met=peak["peak_rss_mb"] < RSS_GOAL_MB, command=COMMAND))
    return out
