"""One server run of an interval log, recorded as the log shows it: its session is created
when the run first shows an interval, a request or a failure, each interval and request is
written as an event once read (the import's own writer, adapters/logs/intervals/record.py,
so the session is the one `import` records), and the session is closed with the run's
final configuration when the run ends: a later start in the file, the file replaced, or
the watch stopped (then the run is `log_ends`, as `import` of the log so far says)."""

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from adapters.logs.intervals.record import (
    RunWriter,
    Source,
    in_log_order,
    run_error,
    session_config,
)
from adapters.logs.intervals.run import IntervalLine, ServerRun
from eventlog import Recorder, SessionStatus
from specledger.api import new_session
from specledger.watch.prune import forget_sessions
from specledger.watch.store import note_key, update_config


@dataclass(frozen=True)
class RunPlace:
    """Where a run begins: its file's `log`, the byte offset and number of its first line,
    and its `key` (the file, the offset and the line's bytes), which a resumed watch
    knows it by."""

    log: str
    start: int
    line: int
    key: str


class LiveRun:
    """The session of the run at `place`, written into the ledger behind `engine`;
    `replaces`: the session an earlier watch, stopped inside this run, left of it."""

    def __init__(self, engine: Engine, place: RunPlace, replaces: int | None) -> None:
        self.engine, self.place, self.replaces = engine, place, replaces
        self.session: int | None = None
        self.failures = 0  # the run's failures reported so far
        self._recorder: Recorder | None = None
        self._writer: RunWriter | None = None
        self._written = (0, 0)  # intervals and requests written
        self._turn = 0

    def config(self, run: ServerRun, src: Source) -> dict[str, Any]:
        """The session's configuration from what the run shows so far."""
        return {**session_config(run, src),
                "watch": {"log": self.place.log, "start": self.place.start}}

    def write(self, run: ServerRun, src: Source, whole: bool) -> None:
        """Write the run's intervals and requests not written yet; unless `whole` (the
        log settled, or the run ended), the newest interval, and what follows it, wait
        for the next interval: vLLM joins a `SpecDecoding` line to the stats line printed
        before it in the same second, whatever lines come between."""
        n_iv, n_rq = self._written
        intervals, requests = run.intervals[n_iv:], run.requests[n_rq:]
        if not whole and intervals:
            newest = intervals.pop().line
            requests = [r for r in requests if r.line < newest]
        if not intervals and not requests and (self.session is not None or not run.failures):
            return
        writer = self._open(run, src)
        for item in in_log_order(intervals, requests):
            if isinstance(item, IntervalLine):
                writer.interval(item)
            else:
                self._turn += 1
                writer.request(self._turn, item)
        self._written = (n_iv + len(intervals), n_rq + len(requests))
        assert self._recorder is not None
        self._recorder.flush()

    def _open(self, run: ServerRun, src: Source) -> RunWriter:
        """The run's writer, its session created first if it has none yet."""
        if self._writer is not None:
            return self._writer
        if self.replaces is not None:
            forget_sessions(self.engine, [self.replaces])
        self.session = new_session(self.engine, self.config(run, src), f"{run.engine}-log")
        note_key(self.engine, self.place.log, self.place.key, self.session, 0, run.index + 1,
                 self.place.start)
        self._recorder = Recorder(self.engine, self.session)
        self._writer = RunWriter(self._recorder, None)
        return self._writer

    def close(self, run: ServerRun, src: Source) -> int | None:
        """Write the rest of the ended `run`, store its final configuration and close its
        session (`failed` where the run died); the session (None: the run showed
        nothing to record)."""
        self.write(run, src, whole=True)
        if self.session is None or self._recorder is None:
            return None
        update_config(self.engine, self.session, self.config(run, src))
        failed = run_error(run) is not None
        self._recorder.close(SessionStatus.FAILED if failed else SessionStatus.FINISHED)
        return self.session
