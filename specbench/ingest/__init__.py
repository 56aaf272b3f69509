"""Suite `ingest`: the ledger at fleet scale.

Many writer processes record sessions into one ledger at once: 8 into a PostgreSQL
database, 4 into a SQLite file, each beside a single writer for scale. Every writer plays
the journal calls of one recorded sim session (real payloads, rounds and turn-end
flushes) into new sessions through the real `Recorder`, so what is timed is the ledger's
ingest, not an engine. The aggregate rate is all events over the wall time from the
moment every writer is released until the last one closes its last session, the median of
`repeat` runs interleaved with the single writer's, each on a fresh ledger (a shared
2-core machine is noisy); afterwards each ledger must hold every session whole.
PostgreSQL is a throwaway server of this suite's own with its durable defaults (fsync and
synchronous commit on); SQLite runs in WAL mode with synchronous=NORMAL, as the recorder
configures it. Needs the PostgreSQL server binaries (apt-get install postgresql).
"""

import pickle
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.config import RunConfig
from engine.session import Session
from specbench.common import (
    BenchOptions,
    Goal,
    SuiteResult,
    ledger_env,
    md_table,
    new_figure,
    save_figure,
)
from specbench.ingest.journal_script import ScriptJournal
from specbench.ingest.runs import IngestRun, measure
from specbench.pg_cluster import start_cluster

COMMAND = "specledger bench ingest"
FLEET = {"sqlite": 4, "postgresql": 8}
"""Writers at once per backend (the goal's setups); each also runs alone for scale."""


@dataclass(frozen=True)
class Sizes:
    """The session every writer plays, how many sessions each writes, and how many times
    each setup runs."""

    seed: RunConfig
    sessions: int
    repeat: int


FULL = Sizes(RunConfig(backend="sim", turns=2, prompt_tokens=512, answer_tokens=2000,
                       acceptance=0.7, draft_max=8), sessions=10, repeat=3)
QUICK = Sizes(RunConfig(backend="sim", turns=1, prompt_tokens=64, answer_tokens=200),
              sessions=2, repeat=1)

Ledger = Callable[[str], str]  # a name -> the URL of a fresh, empty ledger


def _measure_backend(backend: str, ledger: Ledger, script: Path, events: int, sizes: Sizes,
                     opts: BenchOptions) -> list[list[IngestRun]]:
    """[one-writer runs, fleet runs] on fresh ledgers, the two interleaved."""
    runs: list[list[IngestRun]] = [[], []]
    for i in range(sizes.repeat):
        for j, writers in enumerate((1, FLEET[backend])):
            opts.log(f"ingest: {backend}, {writers} writer(s) x {sizes.sessions} sessions x "
                     f"{events:,} events (run {i + 1} of {sizes.repeat})")
            runs[j].append(measure(backend, ledger(f"ingest_{writers}_{i}"), script, events,
                                   writers, sizes.sessions))
    return runs


def median_run(runs: list[IngestRun]) -> IngestRun:
    """The run with the median aggregate rate."""
    return sorted(runs, key=lambda r: r.events_per_s)[len(runs) // 2]


def table(runs: list[IngestRun]) -> str:
    """The suite's markdown table."""
    return md_table(
        ["ledger", "writers", "sessions", "events", "wall s", "aggregate events/s",
         "per writer events/s (median)"],
        [(r.backend, r.writers, r.writers * r.sessions, f"{r.events:,}", f"{r.wall_s:.2f}",
          f"{r.events_per_s:,.0f}",
          f"{sorted(r.to_dict()['per_writer_events_per_s'])[r.writers // 2]:,.0f}")
         for r in runs])


def plot(runs: list[IngestRun], folder: Path) -> list[Path]:
    """Bars: aggregate events/s per ledger, one writer beside the fleet."""
    fig, ax = new_figure()
    labels = [f"{r.backend}\n{r.writers} writer{'s' if r.writers > 1 else ''}" for r in runs]
    colors = ["tab:blue" if r.backend == "sqlite" else "tab:purple" for r in runs]
    bars = ax.bar(labels, [r.events_per_s for r in runs], color=colors)
    ax.bar_label(bars, labels=[f"{r.events_per_s:,.0f}" for r in runs], padding=2,
                 fontsize="small")
    ax.set_ylabel("aggregate ingest (events/s)")
    ax.set_title("Writers recording into one ledger at once")
    ax.grid(alpha=0.3, axis="y")
    return save_figure(fig, folder / "ingest")


def goals(runs: dict[str, list[list[IngestRun]]], quick: bool) -> list[Goal]:
    """Per fleet: every event of every run stored once and in order, with the median
    aggregate rate beside one writer's."""
    out = []
    note = " (quick run: not to quote)" if quick else ""
    for backend, (alone, fleet) in runs.items():
        problems = [p for r in (*alone, *fleet) for p in r.problems]
        mid, single = median_run(fleet), median_run(alone)
        out.append(Goal(
            name=f"{mid.writers} writers recording into one {backend} ledger at once",
            target="every event stored once, in order",
            measured=f"{len(problems)} problems in {len(fleet)} x {mid.events:,} events; "
                     f"{mid.events_per_s:,.0f} events/s aggregate (median of {len(fleet)}), "
                     f"{mid.events_per_s / single.events_per_s:.2f}x one writer{note}",
            met=not problems,
            command=COMMAND))
    return out


def run(opts: BenchOptions) -> SuiteResult:
    """Record the seed session's calls, run every ledger setup, report."""
    sizes = QUICK if opts.quick else FULL
    journal = ScriptJournal()
    Session(sizes.seed.replace(seed=opts.seed), journal).run()
    runs: dict[str, list[list[IngestRun]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.pickle"
        script.write_bytes(pickle.dumps(journal.calls))
        runs["sqlite"] = _measure_backend("sqlite", lambda name: str(Path(tmp) / f"{name}.db"),
                                          script, journal.events, sizes, opts)
        with start_cluster(durable=True) as cluster:
            runs["postgresql"] = _measure_backend("postgresql", cluster.create_database,
                                                  script, journal.events, sizes, opts)
            server = cluster.version
    medians = [median_run(r) for pair in runs.values() for r in pair]
    data = {"runs": [r.to_dict() for r in medians],
            "all_rates": {b: {str(p[0].writers): [r.events_per_s for r in p] for p in pair}
                          for b, pair in runs.items()},
            "repeat": sizes.repeat, "seed": sizes.seed.to_dict(),
            "env": ledger_env(postgresql=server, postgresql_durable=True)}
    files = plot(medians, opts.suite_dir("ingest"))
    return SuiteResult(name="ingest", data=data, table=table(medians),
                       goals=goals(runs, opts.quick), files=files)
