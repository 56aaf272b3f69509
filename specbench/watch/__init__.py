"""`specledger bench watch`: what `specledger watch` costs and how far behind it is, on a
real llama-server (the shipped target with its MTP head, `-np 2`, `-v`) driven by two
concurrent `openai` clients.

- overhead: the clients' tok/s at full speed, without and with a watch following the log
  (passes alternated, a fresh server each; medians): the reader must not slow the server
  it watches. The machine is shared and has 2 cores, which the server, its clients and
  the watch all want: the spread is wide, and the medians are what to quote; what the
  watch itself spends is its CPU at the steady load, per MiB of log it reads.
- lag, at a steady load (each client reads an answer 0.2 s before asking again): per
  request, from its last log line (the server's start plus the line's own time) to its
  session committed; per finding, from the line that proves it to the finding printed.
- ring: a long run of single questions with `--ring 64`: the watch's resident memory and
  the ledger's size on disk, sampled through it (flat: nothing fired, nothing written).
"""

import statistics
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from adapters.llama.gguf.export import model_gguf
from adapters.llama.server.paths import require_server
from specbench.common import BenchOptions, Goal, SuiteResult, md_table
from specbench.watch.runs import lag, median, overhead, pct, ring

SUITE = "watch"
COMMAND = "specledger bench watch"
LAG_GOAL_S = 1.0
FLAT_GOAL = 0.05  # the ring run's memory may grow by at most this between its 2nd and 4th quarter
OVERHEAD_GOAL = 0.9  # tok/s with a watch, at least this share of tok/s without


@dataclass(frozen=True)
class Plan:
    """Seconds of load per overhead pass and `repeats` pairs of passes, seconds of the
    steady-load run, seconds of the ring run, its rounds per slot and sampling period."""

    overhead_s: float
    repeats: int
    lag_s: float
    ring_s: float
    ring_rounds: int
    every_s: float


FULL = Plan(overhead_s=20.0, repeats=3, lag_s=60.0, ring_s=240.0, ring_rounds=64, every_s=4.0)
QUICK = Plan(overhead_s=2.0, repeats=1, lag_s=3.0, ring_s=4.0, ring_rounds=64, every_s=0.5)


def _quarters(values: list[float]) -> tuple[float, float]:
    """Medians of the second and the last quarter of `values` (the first is warm-up)."""
    q = max(1, len(values) // 4)
    return statistics.median(values[q:2 * q]), statistics.median(values[-q:])


def run(opts: BenchOptions) -> SuiteResult:
    """Measure the overhead, the lag and the ring's memory; table, goals, results."""
    plan = QUICK if opts.quick else FULL
    binary = require_server(opts.llama_build)
    model = model_gguf("shipped:target", build=opts.llama_build)
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as tmp:
        work = Path(tmp)
        opts.log(f"watch: overhead, {plan.repeats} x 2 passes of {plan.overhead_s:.0f} s")
        tok_s = overhead(binary, model, work, plan.overhead_s, plan.repeats)
        opts.log(f"watch: lag, {plan.lag_s:.0f} s at the steady load")
        lagged = lag(binary, model, work, plan.lag_s)
        opts.log(f"watch: ring, {plan.ring_s:.0f} s")
        ringed = ring(binary, model, work, plan.ring_s, plan.ring_rounds, plan.every_s)
    without, with_watch = median(tok_s["without"]), median(tok_s["with"])
    share = with_watch / without
    ledger, found = lagged.ledger_lag_s, lagged.finding_lag_s
    rss = [s[1] for s in ringed.samples]
    early, late = _quarters(rss)
    growth = late / early - 1
    db_sizes = [s[2] for s in ringed.samples]
    rows = [
        ("server tok/s without a watch (median)", f"{without:.1f}",
         ", ".join(f"{v:.1f}" for v in tok_s["without"])),
        ("server tok/s with a watch (median)", f"{with_watch:.1f} ({100 * share:.0f}%)",
         ", ".join(f"{v:.1f}" for v in tok_s["with"])),
        ("steady load: requests, log volume", f"{lagged.requests}",
         f"{lagged.log_mib_s:.2f} MiB/s of log"),
        ("steady load: the watch's CPU", f"{100 * lagged.cpu_share:.0f}% of one core",
         f"{lagged.cpu_share / lagged.log_mib_s:.2f} core-s per MiB of log"),
        ("last log line to session committed", f"median {1e3 * median(ledger):.0f} ms",
         f"p95 {1e3 * pct(ledger, 0.95):.0f} ms, max {1e3 * max(ledger):.0f} ms"),
        ("proving line to finding printed", f"median {1e3 * median(found):.0f} ms"
         if found else "no finding", f"max {1e3 * max(found):.0f} ms, {len(found)} findings"
         if found else ""),
        (f"ring mode ({plan.ring_rounds} rounds/slot): watch RSS",
         f"{early:.1f} -> {late:.1f} MiB ({100 * growth:+.1f}%)",
         f"{ringed.requests} requests, {len(rss)} samples; first {rss[0]:.1f} MiB "
         f"(warming up), max {max(rss):.1f} MiB"),
        ("ring mode: ledger on disk", f"{db_sizes[0]} -> {db_sizes[-1]} bytes",
         f"{ringed.summary['recorded']} request(s) written; with SQLite's write-ahead "
         "log, which holds the cursor's updates and is checkpointed at about 4 MB"),
    ]
    table = md_table(["measure", "value", "detail"], rows)
    goals = [
        Goal("watch: log line to ledger", f"p95 < {LAG_GOAL_S:.0f} s",
             f"{1e3 * pct(ledger, 0.95):.0f} ms", pct(ledger, 0.95) < LAG_GOAL_S, COMMAND),
        Goal("watch: proving line to finding printed", f"max < {LAG_GOAL_S:.0f} s",
             f"{1e3 * max(found):.0f} ms" if found else "no finding",
             bool(found) and max(found) < LAG_GOAL_S, COMMAND),
        Goal("watch: ring mode memory flat", f"< {100 * FLAT_GOAL:.0f}% growth",
             f"{100 * growth:+.1f}%", growth < FLAT_GOAL, COMMAND),
        Goal("watch: server tok/s kept", f">= {100 * OVERHEAD_GOAL:.0f}%",
             f"{100 * share:.0f}%", share >= OVERHEAD_GOAL, COMMAND),
    ]
    data = {"plan": asdict(plan), "tok_s": tok_s,
            "lag": asdict(lagged), "ring": asdict(ringed),
            "note": "2-core machine shared with other jobs: timings are noisy; medians"}
    return SuiteResult(SUITE, data, table, goals)
