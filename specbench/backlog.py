"""`specledger bench backlog`: a watch catching up on a big `-v` backlog through log
rotations, losing nothing.

A watch is following `server.log`, caught up on the one run it holds. A backlog then lands
at once:
copies of one real llama-server run (the shipped target with its MTP head, `-np 2`,
`-v`, driven by two `openai` clients; each copy is that server restarted, appending to
the same file), `size_mib` in all, written in `rotations + 1` parts, the file rotated as
logrotate does after each part but the last (`server.log.N` renamed to `.N+1`,
`server.log` to `.1`, a new `server.log`). The rotations happen while the watch has read
only the first few MiB of the first part, most of them between two of its polls.

Measured: every request recorded exactly once (the ledger holds copies x the run's
requests, each key once, none incomplete, their prompt and completion tokens those the
clients were answered, copy for copy), nothing said lost, the rotations seen, how long the
watch took to catch up and its rate, and its peak resident memory (a poll reads at most
4 MiB, so memory must not grow with the backlog). Needs `make llama`.
"""

import math
import statistics
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError

from adapters.llama.gguf.export import model_gguf
from adapters.llama.server.paths import require_server
from engine.errors import BackendError
from eventlog import open_db
from eventlog.schema import sessions
from fsm.errors import SpecledgerError
from specbench.common import BenchOptions, Goal, SuiteResult, md_table
from specbench.watch.load import drive, llama_server, rss_mib, start_watch
from specledger.api import session_turns
from specledger.watch.store import requests

SUITE = "backlog"
COMMAND = "specledger bench backlog"
CLIENTS = 2


@dataclass(frozen=True)
class Plan:
    """The backlog's size, the rotations while it is read, the seconds of the source run
    and its answers' length (a `-v` log holds a few lines per token), and how long the
    watch may take to catch up."""

    size_mib: int
    rotations: int
    source_s: float
    max_tokens: int
    timeout_s: float


FULL = Plan(size_mib=1024, rotations=3, source_s=30.0, max_tokens=256, timeout_s=3600.0)
QUICK = Plan(size_mib=8, rotations=3, source_s=3.0, max_tokens=32, timeout_s=600.0)


@dataclass
class Catchup:
    """What the watch did with the backlog: the copies and parts written, the requests
    expected and recorded (the first run's with them), seconds to write the backlog and
    to catch up (from the first byte written to the last request committed), the resident
    memory sampled (MiB), and the watch's own summary."""

    copies: int
    parts: list[int]
    backlog_bytes: int
    expected: int
    recorded: int = 0
    write_s: float = 0.0
    catchup_s: float = 0.0
    rss_mib: list[float] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def logrotate(log: Path) -> None:
    """Rotate `log` as logrotate does (without compression): shift its numbered copies up
    by one, rename it to `.1`, create it anew, empty."""
    numbered = sorted((int(p.name.rsplit(".", 1)[1]), p) for p in log.parent.glob(f"{log.name}.*")
                      if p.name.rsplit(".", 1)[1].isdigit())
    for n, p in reversed(numbered):
        p.rename(log.with_name(f"{log.name}.{n + 1}"))
    log.rename(log.with_name(f"{log.name}.1"))
    log.touch()


def parts_of(copies: int, n: int) -> list[int]:
    """`copies` split into `n` parts as even as can be, the larger first."""
    return [copies // n + (i < copies % n) for i in range(n)]


def _recorded(db: Path) -> int:
    """Requests in the ledger so far (none before the watch created it)."""
    try:
        with open_db(str(db), create=False).connect() as conn:
            return conn.execute(select(func.count()).select_from(requests)).scalar_one()
    except (SpecledgerError, SQLAlchemyError):  # not there yet, or its tables not yet
        return 0


def catch_up(run: bytes, work: Path, plan: Plan, per_copy: int) -> Catchup:
    """Lay the backlog of copies of `run` (`per_copy` requests each) under a watch caught
    up on one, rotating between parts; wait until it has recorded them all."""
    copies = max(plan.rotations + 1, math.ceil(plan.size_mib * 2**20 / len(run)))
    out = Catchup(copies, parts_of(copies, plan.rotations + 1), copies * len(run),
                  (copies + 1) * per_copy)
    log, db = work / "server.log", work / "ledger.db"
    log.write_bytes(run)  # the watch starts on one run and catches up on it first
    with start_watch(log, str(db)) as watch:
        while _recorded(db) < per_copy:
            if watch.proc.poll() is not None:
                raise BackendError("the watch ended before it caught up on the first run")
            time.sleep(0.2)
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.5):
                try:
                    out.rss_mib.append(rss_mib(watch.proc.pid))
                except FileNotFoundError:  # the watch ended (a failure, said below)
                    return

        sampler = threading.Thread(target=sample, name="rss", daemon=True)
        sampler.start()
        start = time.monotonic()
        for i, n in enumerate(out.parts):
            with log.open("ab") as f:
                for _ in range(n):
                    f.write(run)
            if i < plan.rotations:
                logrotate(log)
        out.write_s = time.monotonic() - start
        while (got := _recorded(db)) < out.expected:
            if time.monotonic() - start > plan.timeout_s or watch.proc.poll() is not None:
                break
            time.sleep(1.0)
        out.catchup_s = time.monotonic() - start
        stop.set()
        sampler.join()
        out.summary = watch.stop()
    out.recorded = got
    return out


def recorded_shapes(db: Path) -> tuple[Counter[tuple[int, int]], int, int]:
    """The (prompt, completion) tokens of every recorded request, the number of distinct
    keys, and the sessions not `finished`."""
    engine = open_db(str(db), create=False)
    with engine.connect() as conn:
        rows = conn.execute(select(requests.c.session_id, requests.c.key, sessions.c.status)
                            .join(sessions, sessions.c.id == requests.c.session_id)).all()
    shapes: Counter[tuple[int, int]] = Counter()
    for sid, _, _ in rows:
        turns = session_turns(engine, sid).ended
        shapes.update((t.prompt_tokens, t.generated_tokens) for t in turns)
    return shapes, len({key for _, key, _ in rows}), sum(s != "finished" for *_, s in rows)


def run(opts: BenchOptions) -> SuiteResult:
    """Record a source run, lay the backlog under a watch, check and time what it did."""
    plan = QUICK if opts.quick else FULL
    binary = require_server(opts.llama_build)
    model = model_gguf("shipped:target", build=opts.llama_build)
    with tempfile.TemporaryDirectory(prefix="bench-backlog-") as tmp:
        work = Path(tmp)
        opts.log(f"backlog: the source run, {plan.source_s:.0f} s of {CLIENTS} clients")
        source = work / "source.log"
        with llama_server(binary, model, source) as server:
            phase = drive(server.port, CLIENTS, plan.source_s, max_tokens=plan.max_tokens)
        run_bytes = source.read_bytes()
        run_bytes += b"" if run_bytes.endswith(b"\n") else b"\n"
        answered = Counter((a.prompt_tokens, a.completion_tokens) for a in phase.answered)
        per_copy = len(phase.answered)
        opts.log(f"backlog: {plan.size_mib} MiB of copies of a {len(run_bytes) / 2**20:.1f} "
                 f"MiB run ({per_copy} requests), {plan.rotations} rotations")
        caught = catch_up(run_bytes, work, plan, per_copy)
        shapes, keys, unfinished = recorded_shapes(work / "ledger.db")
    want = Counter({shape: n * (caught.copies + 1) for shape, n in answered.items()})
    s = caught.summary
    exact = (caught.recorded == keys == caught.expected and shapes == want
             and unfinished == 0 and s["gaps"] == 0)
    mib = caught.backlog_bytes / 2**20
    rate = mib / caught.catchup_s
    rss = caught.rss_mib
    rows = [
        ("the source run", f"{per_copy} requests, {len(run_bytes) / 2**20:.2f} MiB of log",
         f"{CLIENTS} clients, {plan.source_s:.0f} s"),
        ("the backlog", f"{mib:.0f} MiB, {caught.copies} copies",
         f"{len(caught.parts)} files: {', '.join(map(str, caught.parts))} copies; written "
         f"in {caught.write_s:.1f} s, {plan.rotations} rotations meanwhile"),
        ("requests recorded", f"{caught.recorded} of {caught.expected}",
         f"{keys} distinct keys, {unfinished} not finished, prompt/completion tokens "
         + ("as answered" if shapes == want else "NOT as answered")),
        ("said lost", f"{s['gaps']} stretch(es)", f"{s['lost_bytes']} byte(s) known"),
        ("switches seen", ", ".join(f"{n} {why}" for why, n in Counter(s["switches"]).items())
         or "none", "rotated: a file; restarted: a server run within one (each copy)"),
        ("caught up in", f"{caught.catchup_s:.0f} s", f"{rate:.1f} MiB/s, "
         f"{caught.recorded / caught.catchup_s:.1f} requests/s"),
        ("watch resident memory", f"peak {max(rss):.0f} MiB" if rss else "not sampled",
         f"median {statistics.median(rss):.0f} MiB, {len(rss)} samples" if rss else ""),
    ]
    table = md_table(["measure", "value", "detail"], rows)
    goals = [Goal(f"watch: a {mib:.0f} MiB backlog through {plan.rotations} rotations",
                  "every request once, none lost", f"{caught.recorded} of {caught.expected}, "
                  f"{s['gaps']} lost", exact, COMMAND)]
    data = {"plan": asdict(plan), "catchup": asdict(caught), "per_copy": per_copy,
            "run_bytes": len(run_bytes), "distinct_keys": keys, "unfinished": unfinished,
            "as_answered": shapes == want,
            "note": "2-core machine shared with other jobs: the rate is noisy"}
    return SuiteResult(SUITE, data, table, goals)
