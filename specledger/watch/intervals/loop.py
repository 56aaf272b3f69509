"""The watch of an interval log, poll by poll: the intake hands the new lines to the
engine's reader (intake.py), each run's session is written on as its lines come
(live.py), a failure is reported once the log has shown its lines (it settled), and an
ended run is closed and the rest of its postmortem reported (findings.py); old runs are
pruned (keep.py) and what the watch says goes through the report stage (report.py).

A watch stopped (or killed) inside a run reads that run again, whole, and its session
replaces the one the earlier watch left of it. A file replaced (rotated, truncated,
rewritten) ends its runs; a server started again in the same file begins a run of its own,
as `import` reads them."""

import time
from collections.abc import Callable
from typing import Any

from adapters.logs.intervals.record import Source, plain_peer
from adapters.logs.intervals.run import RunEnding, ServerRun
from eventlog import open_db
from eventlog.postmortem.finding import Finding
from specledger.watch.follower import Chunk
from specledger.watch.intervals.findings import (
    failure_findings,
    run_finding_doc,
    run_finding_line,
    run_findings,
)
from specledger.watch.intervals.intake import RunFile, RunIntake
from specledger.watch.intervals.live import LiveRun
from specledger.watch.keep import Keeper
from specledger.watch.options import WatchOptions
from specledger.watch.polling import SAVE_EVERY_S, Polling
from specledger.watch.report import Reporter
from specledger.watch.store import ensure_tables
from specledger.watch.tally import WatchTally


class IntervalWatcher(Polling):
    """Follows one vLLM or SGLang log (`opts.engine`) into one ledger; `say` prints a
    line, `emit` a finding's JSON."""

    def __init__(self, opts: WatchOptions, say: Callable[[str], None],
                 emit: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.opts = opts
        engine = open_db(opts.db, create=True)
        ensure_tables(engine)
        self.tally = WatchTally()
        self.report = Reporter(opts, say, emit, self.tally)
        self.keep = Keeper(engine, opts, False, self.tally)
        self.intake = RunIntake(engine, opts, self.tally)
        self._fed_at = self._saved_at = 0.0
        self._stopping = False  # runs closed now are cut by this watch's stop

    def step(self) -> bool:
        """One poll; whether it read anything."""
        chunks = self.intake.poll()
        self._say_gaps()
        self._read(chunks)
        self._advance(settled=time.monotonic() - self._fed_at >= self.opts.settle_s)
        if chunks and time.monotonic() - self._saved_at >= SAVE_EVERY_S:
            self._save()
        return bool(chunks)

    def _say_gaps(self) -> None:
        self.say_gaps([self.intake.follower])

    def _read(self, chunks: list[Chunk]) -> None:
        """Feed the chunks; every run of a file they replaced ends."""
        for ended in self.intake.feed(chunks):
            self._end(ended)
        if chunks:
            self._fed_at = time.monotonic()

    def _advance(self, settled: bool) -> None:
        """Write what each run of the file showed since; close the runs a later start
        ended; once the log settled, report the failures read."""
        f = self.intake.file
        if f is None:
            return
        runs = f.lines.runs()
        for i in range(f.closed, len(runs)):
            if i < len(runs) - 1:
                self._close(f, runs[i])
                continue
            f.live[i].write(runs[i], self._source(f), whole=settled)
            if settled:
                self._failures(f.live[i], runs[i])

    def _source(self, f: RunFile) -> Source:
        return Source(self.intake.log, "", f.lines.count(), peers=tuple(f.peers))

    def _failures(self, live: LiveRun, run: ServerRun) -> None:
        """Report the run's failures not reported yet."""
        for found in failure_findings(run.failures[live.failures:]):
            self._found(found, run, live.session)
        live.failures = len(run.failures)

    def _close(self, f: RunFile, run: ServerRun) -> None:
        """Close the next run of `f` (ended): its session, the failures it still holds,
        its postmortem."""
        live = f.live[f.closed]
        sid = live.close(run, self._source(f))
        f.closed += 1
        self._failures(live, run)
        peer = plain_peer(run)
        if peer is not None:
            f.peers.append(peer)
        if sid is None:
            return
        self.tally.recorded += 1
        self.tally.incomplete += self._stopping and run.ending is RunEnding.LOG_ENDS
        for found in run_findings(self.keep.engine, sid, self.opts.severity):
            self._found(found, run, sid)
        self.keep.prune()

    def _found(self, found: Finding, run: ServerRun, session: int | None) -> None:
        self.report.metrics.findings.labels(found.kind.value, found.severity.value).inc()
        doc = run_finding_doc(found, run, session, self.intake.log)
        self.report.finding(doc, run_finding_line)

    def _end(self, f: RunFile) -> None:
        """`f` is read to its end: every run of it still open ends there."""
        runs = f.lines.finish()
        while f.closed < len(runs):
            self._close(f, runs[f.closed])

    def _save(self) -> None:
        self._saved_at = time.monotonic()
        self.intake.save()

    def finish(self) -> None:
        """Read what the log holds now; save the cursor at the run still open, then close
        it (the next watch reads it again whole)."""
        self._read(self.intake.poll())
        self._say_gaps()
        self._advance(settled=True)
        if self.intake.file is not None:
            self._save()
            self._stopping = True
            self._end(self.intake.file)
        self.keep.finish()
        self.report.close()
        self.intake.close()
