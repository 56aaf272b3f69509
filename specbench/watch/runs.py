"""The three measurements of `specledger bench watch`, each on fresh llama-servers of the
shipped target (`-np 2`, MTP, `-v`): what following the log costs the server (its tok/s
with and without a watch, passes alternated), how far behind the log the ledger and the
findings are at a steady load, and the watch's memory over a long run in ring mode."""

import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from adapters.process import free_port
from eventlog import open_db
from eventlog.schema import sessions
from specbench.watch.load import (
    Served,
    cpu_s,
    drive,
    llama_server,
    rss_mib,
    start_watch,
    wait_recorded,
)
from specledger.watch.store import requests

CLIENTS = 2
THINK_S = 0.2  # the steady load: each client reads an answer this long before asking again


def _ready(db: Path, timeout_s: float = 60.0) -> None:
    """Wait until a watch started on `db` has created it (its imports are done)."""
    end = time.monotonic() + timeout_s
    while not db.exists() and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(0.5)


def _count(db: Path) -> int:
    if not db.exists():
        return 0
    with open_db(str(db), create=False).connect() as conn:
        return len(conn.execute(select(requests.c.key)).all())


def overhead(binary: Path, model: Path, work: Path, seconds: float, repeats: int
             ) -> dict[str, list[float]]:
    """Clients' tok/s over `seconds` of full-speed load, `repeats` passes each without and
    with a watch following the log, alternated (a fresh server per pass)."""
    out: dict[str, list[float]] = {"without": [], "with": []}
    for i in range(repeats):
        for mode in ("without", "with"):
            log, db = work / f"overhead-{i}-{mode}.log", work / f"overhead-{i}.db"
            with llama_server(binary, model, log) as server:
                if mode == "with":
                    with start_watch(log, str(db)) as watch:
                        _ready(db)
                        phase = drive(server.port, CLIENTS, seconds)
                        watch.stop()
                else:
                    phase = drive(server.port, CLIENTS, seconds)
            out[mode].append(phase.tok_s)
    return out


@dataclass
class LagRun:
    """The steady-load run: requests answered, log bytes written per second, the share of
    one core the watch used while the clients ran, per request the seconds from its last
    log line to its session committed, per finding the seconds from the line that proves
    it to the finding printed, and the watch's own summary."""

    requests: int
    log_mib_s: float
    cpu_share: float
    ledger_lag_s: list[float] = field(default_factory=list)
    finding_lag_s: list[float] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def lag(binary: Path, model: Path, work: Path, seconds: float) -> LagRun:
    """Drive the server at the steady load with a watch following it; measure the lags."""
    log, db = work / "lag.log", work / "lag.db"
    with llama_server(binary, model, log) as server, \
            start_watch(log, str(db), "--metrics-port", str(free_port())) as watch:
        _ready(db)
        cpu0 = cpu_s(watch.proc.pid)
        phase = drive(server.port, CLIENTS, seconds, think_s=THINK_S)
        wait_recorded(lambda: _count(db), len(phase.answered))
        cpu = cpu_s(watch.proc.pid) - cpu0
        summary = watch.stop()
    run = LagRun(len(phase.answered), log.stat().st_size / 2**20 / phase.seconds,
                 cpu / phase.seconds, summary=summary)
    run.ledger_lag_s = _ledger_lags(db, server)
    run.finding_lag_s = [t - server.wall(d["log_t"]) for t, d in watch.findings]
    return run


def _ledger_lags(db: Path, server: Served) -> list[float]:
    """Per request: its session's commit (the key noted with it) less its last line's
    wall time."""
    with open_db(str(db), create=False).connect() as conn:
        got = conn.execute(select(requests.c.recorded, sessions.c.config)
                           .join(sessions, sessions.c.id == requests.c.session_id)).all()
    return [when.timestamp() - server.wall(config["watch"]["last_t"])
            for when, config in got if config["watch"]["last_t"] is not None]


@dataclass
class RingRun:
    """The long run in ring mode: (seconds since start, watch RSS MiB, ledger bytes)
    sampled through it, requests answered, and what the watch said at the end."""

    samples: list[tuple[float, float, int]]
    requests: int
    summary: dict[str, Any]


def ring(binary: Path, model: Path, work: Path, seconds: float, rounds: int,
         every_s: float) -> RingRun:
    """Single questions for `seconds` with `watch --ring --severity error` following (the
    flight recorder waits for an incident: a context restore, a warning every request
    of this hybrid target pays, writes nothing); the watch's memory and the ledger's
    size every `every_s`."""
    log, db = work / "ring.log", work / "ring.db"
    samples: list[tuple[float, float, int]] = []
    with llama_server(binary, model, log) as server, \
            start_watch(log, str(db), "--ring", str(rounds), "--severity", "error") as watch:
        _ready(db)
        done = threading.Event()
        start = time.monotonic()

        def sample() -> None:
            while not done.wait(every_s):
                samples.append((time.monotonic() - start, rss_mib(watch.proc.pid),
                                _db_bytes(db)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        phase = drive(server.port, CLIENTS, seconds, second_turn=False)
        done.set()
        sampler.join()
        summary = watch.stop()
    return RingRun(samples, len(phase.answered), summary)


def _db_bytes(db: Path) -> int:
    """The ledger's size on disk, its write-ahead log included."""
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())


def pct(values: list[float], q: float) -> float:
    """The `q` quantile (0..1) of `values`, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def median(values: list[float]) -> float:
    """The median (NaN for none)."""
    return statistics.median(values) if values else float("nan")
