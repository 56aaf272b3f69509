"""The ingest suite's measurement: N writer processes recording into one ledger at once,
timed from the moment all of them are told to go until the last one is done, and the
ledger checked afterwards (every session whole, finished, gap-free, nothing duplicated)."""

import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from eventlog import SessionStatus, list_sessions, open_db
from eventlog.schema import events
from fsm.errors import SpecledgerError


class IngestWriterError(SpecledgerError):
    """An ingest writer process failed to start or to finish."""


@dataclass(frozen=True)
class IngestRun:
    """One measurement: `writers` processes, each writing `sessions` sessions of
    `events_per_session` events; `wall_s` from go to the last writer's end, each writer's
    own seconds, and what the check found wrong with the ledger afterwards."""

    backend: str
    writers: int
    sessions: int
    events_per_session: int
    wall_s: float
    writer_s: list[float]
    problems: tuple[str, ...] = ()

    @property
    def events(self) -> int:
        """Events written by all writers together."""
        return self.writers * self.sessions * self.events_per_session

    @property
    def events_per_s(self) -> float:
        """The aggregate ingest rate."""
        return self.events / self.wall_s

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"backend": self.backend, "writers": self.writers, "sessions": self.sessions,
                "events_per_session": self.events_per_session, "events": self.events,
                "wall_s": self.wall_s, "events_per_s": self.events_per_s,
                "writer_s": self.writer_s, "problems": list(self.problems),
                "per_writer_events_per_s": [self.sessions * self.events_per_session / s
                                            for s in self.writer_s]}


def _line(proc: subprocess.Popen[str]) -> list[str]:
    assert proc.stdout is not None
    return proc.stdout.readline().split()


def measure(backend: str, url: str, script: Path, events_per_session: int, writers: int,
            sessions: int) -> IngestRun:
    """Start `writers` workers on the ledger at `url`, release them together, time them,
    then check the ledger."""
    procs = [subprocess.Popen(
        [sys.executable, "-m", "specbench.ingest.worker", url, str(script),
         str(sessions)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(writers)]
    try:
        if any(_line(p) != ["ready"] for p in procs):
            raise IngestWriterError(f"an ingest writer on {backend} failed to start")
        start = time.perf_counter()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        done = [_line(p) for p in procs]
        wall = time.perf_counter() - start
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
            p.wait()
    if any(p.returncode != 0 or not d or d[0] != "done" for p, d in zip(procs, done,
                                                                       strict=True)):
        raise IngestWriterError(f"an ingest writer on {backend} failed (exit statuses "
                                f"{[p.returncode for p in procs]})")
    run = IngestRun(backend, writers, sessions, events_per_session, wall,
                    [float(d[2]) for d in done])
    return replace(run, problems=check(url, run))


def check(url: str, run: IngestRun) -> tuple[str, ...]:
    """What is wrong with the ledger after `run` (nothing: every session is whole, finished,
    with `events_per_session` events and seqs first..last without a gap or duplicate, as
    count = max - min + 1 under the unique (session, seq) key shows)."""
    engine = open_db(url, False)
    try:
        infos = list_sessions(engine)
        with engine.connect() as conn:
            spans = conn.execute(
                select(events.c.session_id, func.count(), func.min(events.c.seq),
                       func.max(events.c.seq)).group_by(events.c.session_id)).all()
    finally:
        engine.dispose()
    expected, n = run.writers * run.sessions, run.events_per_session
    problems = [f"{len(infos)} sessions, {len(spans)} with events; {expected} were recorded"
                ] if len(infos) != expected or len(spans) != expected else []
    problems += [f"session {s.id}: {s.status.value}, {s.events} events" for s in infos
                 if s.status is not SessionStatus.FINISHED or s.events != n]
    problems += [f"session {sid}: {count} events at seqs {low}..{high}, {n} recorded"
                 for sid, count, low, high in spans if count != n or high - low + 1 != n]
    return tuple(problems)
