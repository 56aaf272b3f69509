"""The watch of an interval log, poll by poll: the follower's new lines go to the engine's
reader (one per file, lines.py), each run's session is written on as its lines come
(live.py), a failure is reported once the log has shown its lines (it settled), and an
ended run is closed and the rest of its postmortem reported (findings.py).

Where reading resumes is saved at the first line of the run still being read, else at the
first line not read: a watch stopped (or killed) inside a run reads that run again, whole,
and its session replaces the one the earlier watch left of it. A file replaced (rotated,
truncated, rewritten) ends its runs; a server started again in the same file begins a run
of its own, as `import` reads them."""

import time
from collections.abc import Callable
from typing import Any

from adapters.logs.intervals.record import Source, plain_peer
from adapters.logs.intervals.run import RunEnding, ServerRun
from eventlog import open_db
from specledger.watch.follower import Chunk, LogFollower
from specledger.watch.intervals.findings import (
    failure_findings,
    run_finding_doc,
    run_finding_line,
    run_findings,
)
from specledger.watch.intervals.lines import READERS, RunLines
from specledger.watch.intervals.live import LiveRun, RunPlace
from specledger.watch.keep import Keeper
from specledger.watch.options import WatchOptions
from specledger.watch.polling import Polling
from specledger.watch.report import Reporter
from specledger.watch.requests import request_key
from specledger.watch.store import ensure_tables, load_cursor, recorded_sessions, save_cursor
from specledger.watch.tally import WatchTally

SAVE_EVERY_S = 1.0  # as for llama-server's log: a watch killed in a backlog resumes near


class _File:
    """One file being read: its identity, the engine's reader, each run's session (in
    run order), how many of them are closed, the plain runs ended (the speculative ones'
    baseline), and where reading got to."""

    def __init__(self, lines: RunLines, dev: int, ino: int, offset: int, line: int) -> None:
        self.lines, self.dev, self.ino = lines, dev, ino
        self.live: list[LiveRun] = []
        self.closed = 0
        self.peers: list[dict[str, Any]] = []
        self.offset, self.line = offset, line


class IntervalWatcher(Polling):
    """Follows one vLLM or SGLang log (`opts.engine`) into one ledger; `say` prints a
    line, `emit` a finding's JSON."""

    def __init__(self, opts: WatchOptions, say: Callable[[str], None],
                 emit: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.opts, self.log = opts, str(opts.log)
        self.engine = open_db(opts.db, create=True)
        ensure_tables(self.engine)
        self.tally = WatchTally()
        self.report = Reporter(opts, say, emit, self.tally)
        self.keep = Keeper(self.engine, opts, False, self.tally)
        cursor = load_cursor(self.engine, self.log)
        self.follower = LogFollower(opts.log, cursor, opts.read_limit)
        self.file: _File | None = None
        self._earlier: dict[str, int] = {}  # key -> session, of runs read again
        if self.follower.resumed and cursor is not None:
            self.tally.resumed_at = cursor.offset
            self._earlier = recorded_sessions(self.engine, self.log, cursor.offset)
            self.file = _File(READERS[opts.engine](), cursor.dev, cursor.ino, cursor.offset,
                              cursor.line)
        self._fed_at = self._saved_at = 0.0
        self._stopping = False  # runs closed now are cut by this watch's stop

    def step(self) -> bool:
        """One poll; whether it read anything."""
        chunks = self.follower.poll()
        self._say_gaps()
        for chunk in chunks:
            self._chunk(chunk)
        if chunks:
            self._fed_at = time.monotonic()
        self._advance(settled=time.monotonic() - self._fed_at >= self.opts.settle_s)
        if chunks and time.monotonic() - self._saved_at >= SAVE_EVERY_S:
            self._save()
        return bool(chunks)

    def _say_gaps(self) -> None:
        gaps, self.follower.gaps = self.follower.gaps, []
        for gap in gaps:
            self.report.lost(self.follower.path, gap)

    def _chunk(self, chunk: Chunk) -> None:
        """Feed a chunk's lines to its file's reader (a new file's first chunk ends the
        runs of the one before), noting where each run begins."""
        if chunk.switch is not None or self.file is None:
            if chunk.switch is not None:
                self.tally.switches.append(chunk.switch.value)
                self._end_file()
            self.file = _File(READERS[self.opts.engine](), chunk.dev, chunk.ino, chunk.start,
                              chunk.line)
        f = self.file
        offset = chunk.start
        for number, raw in enumerate(chunk.data.split(b"\n")[:-1], chunk.line):
            begun = f.lines.count()
            f.lines.feed(number, raw.decode("utf-8", errors="surrogateescape"))
            if f.lines.count() > begun:
                key = request_key(f.dev, f.ino, offset, raw)
                f.live.append(LiveRun(self.engine, RunPlace(self.log, offset, number, key),
                                      self._earlier.pop(key, None)))
            offset += len(raw) + 1
        f.offset, f.line = offset, chunk.line + chunk.data.count(b"\n")

    def _advance(self, settled: bool) -> None:
        """Write what each run of the file showed since; close the runs a later start
        ended; once the log settled, report the failures read."""
        f = self.file
        if f is None:
            return
        runs = f.lines.runs()
        for i in range(f.closed, len(runs)):
            if i < len(runs) - 1:
                self._close(runs[i])
                continue
            live = f.live[i]
            live.write(runs[i], self._source(), whole=settled)
            if settled:
                self._failures(live, runs[i])

    def _source(self) -> Source:
        f = self.file
        assert f is not None
        return Source(self.log, "", f.lines.count(), peers=tuple(f.peers))

    def _failures(self, live: LiveRun, run: ServerRun) -> None:
        """Report the run's failures not reported yet."""
        for found in failure_findings(run.failures[live.failures:]):
            self._found(found, run, live.session)
        live.failures = len(run.failures)

    def _close(self, run: ServerRun) -> None:
        """Close the next run of the file (ended): its session, the failures it still
        holds, its postmortem."""
        f = self.file
        assert f is not None
        live = f.live[f.closed]
        sid = live.close(run, self._source())
        f.closed += 1
        self._failures(live, run)
        peer = plain_peer(run)
        if peer is not None:
            f.peers.append(peer)
        if sid is None:
            return
        self.tally.recorded += 1
        self.tally.incomplete += self._stopping and run.ending is RunEnding.LOG_ENDS
        for found in run_findings(self.engine, sid, self.opts.severity):
            self._found(found, run, sid)
        self.keep.prune()

    def _found(self, found: Any, run: ServerRun, session: int | None) -> None:
        self.report.metrics.findings.labels(found.kind.value, found.severity.value).inc()
        self.report.finding(run_finding_doc(found, run, session, self.log), run_finding_line)

    def _end_file(self) -> None:
        """The file is read to its end: every run of it still open ends there."""
        f = self.file
        if f is None:
            return
        runs = f.lines.finish()
        while f.closed < len(runs):
            self._close(runs[f.closed])

    def _save(self) -> None:
        """Save where reading resumes: the first line of the run still open, else the
        first line not read."""
        self._saved_at = time.monotonic()
        f, cur = self.file, self.follower.cursor()
        if f is None or cur is None or (cur.dev, cur.ino) != (f.dev, f.ino):
            return  # the follower moved on to the next file; its first chunk saves it
        at = f.live[f.closed].place if f.closed < len(f.live) else None
        offset, line = (at.start, at.line) if at is not None else (f.offset, f.line)
        save_cursor(self.engine, self.log, self.follower.cursor_at(offset, line))

    def finish(self) -> None:
        """Read what the log holds now; save the cursor at the run still open, then close
        it (the next watch reads it again whole)."""
        for chunk in self.follower.poll():
            self._chunk(chunk)
        self._say_gaps()
        self._advance(settled=True)
        if self.file is not None:
            self._save()
            self._stopping = True
            self._end_file()
        self.keep.finish()
        self.report.close()
        self.follower.close()
