"""The watch loop: poll the log, cut it into records, fold them into requests, record
each request (or hold it in the ring), judge it, count it, save where reading got to.

It stops between two polls when asked (SIGINT, SIGTERM, or the caller's `stop`), never
in the middle of a write: what the log had shown by then is read, each request still
being served is recorded as incomplete, and the cursor is saved where reading stopped,
so the next watch of the same log starts there and records no request twice."""

import queue
import re
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from sqlalchemy import Engine

from eventlog import open_db
from eventlog.postmortem.finding import Finding, Severity
from specledger.watch.answers import AnswerFeed
from specledger.watch.findings import FindingHook, finding_doc, finding_line, judge, reported
from specledger.watch.follower import READ_LIMIT, Chunk, Gap, LogFollower, Switch
from specledger.watch.metrics import WatchMetrics
from specledger.watch.prune import prune
from specledger.watch.requests import Request, RequestRecorder
from specledger.watch.ring import Ring
from specledger.watch.store import (
    ensure_tables,
    forget_answers,
    load_cursor,
    note_answer,
    recorded_keys,
    save_cursor,
    store_request,
    taken_answers,
)
from specledger.watch.stream import Piece, RecordStream, merge_facts

_HEADER_BYTES = 1 << 21  # the server's start-up lines are read again on resume, up to this
LAGS_KEPT = 10_000
PRUNE_EVERY_S = 1.0  # a busy server completes many requests a second: prune once for them
# Where reading got to is saved with each request recorded, and at least this often while
# a backlog is read with none completing, so a watch killed then resumes near there.
SAVE_EVERY_S = 1.0
_FIRST_TASK = re.compile(rb"\| task \d+ \| processing task")


@dataclass(frozen=True)
class WatchOptions:
    """What to follow and keep: the log, the ledger, the hook, the metrics port, the
    bounds (`keep` sessions, sessions younger than `keep_for`, `ring` rounds per slot
    held in memory), the lowest severity reported (`severity`), the poll period, and the
    clients' answers file (`responses`) with how long a request waits for its answer, and
    the most bytes one poll reads (`read_limit`: a backlog takes as many polls as it needs)."""

    log: Path
    db: str
    on_finding: str | None = None
    metrics_port: int | None = None
    keep: int | None = None
    keep_for: timedelta | None = None
    ring: int | None = None
    severity: Severity = Severity.WARNING
    poll_s: float = 0.05
    settle_s: float = 0.05
    responses: Path | None = None
    answer_wait_s: float = 5.0
    read_limit: int = READ_LIMIT


@dataclass
class WatchTally:
    """What one watch did: requests recorded (and how many of them were cut by its stop
    or a server restart), requests held in the ring and not written, requests skipped
    as already recorded, findings, sessions pruned, file switches, the lag of each of
    the last LAGS_KEPT requests (a watch that runs for weeks keeps no more), and, with
    answers followed, the requests recorded with their answer and without one, and the
    stretches of the log that could not be read (`gaps`, `lost_bytes` of them known)."""

    recorded: int = 0
    incomplete: int = 0
    ring_dropped: int = 0
    skipped: int = 0
    findings: int = 0
    pruned: int = 0
    switches: list[str] = field(default_factory=list)
    lags: deque[float] = field(default_factory=lambda: deque(maxlen=LAGS_KEPT))
    resumed_at: int | None = None
    answered: int = 0
    unanswered: int = 0
    gaps: int = 0
    lost_bytes: int = 0


class Watcher:
    """Follows one log into one ledger; `say` prints a line, `emit` a finding's JSON."""

    def __init__(self, opts: WatchOptions, say: Callable[[str], None],
                 emit: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.opts = opts
        self.log = str(opts.log)
        self.say, self.emit = say, emit
        self.engine: Engine = open_db(opts.db, create=True)
        ensure_tables(self.engine)
        self.tally = WatchTally()
        self.metrics = WatchMetrics()
        self.ring = Ring(opts.ring) if opts.ring is not None else None
        self.hook = FindingHook(opts.on_finding) if opts.on_finding else None
        self.answers: AnswerFeed | None = None
        if opts.responses is not None:
            key = self.answers_key = answers_key(self.log, opts.responses)
            self.answers = AnswerFeed(opts.responses, opts.answer_wait_s,
                                      load_cursor(self.engine, key),
                                      taken_answers(self.engine, key), opts.read_limit)
        cursor = load_cursor(self.engine, self.log)
        self.follower = LogFollower(opts.log, cursor, opts.read_limit)
        self.stream = RecordStream(opts.settle_s)
        self.recorder: RequestRecorder | None = None
        self._last_facts = self.stream.server
        self._seen: set[str] = set()  # keys recorded by an earlier run, beyond the cursor
        self._pruned_at = self._saved_at = 0.0
        if self.follower.resumed and cursor is not None:
            self.tally.resumed_at = cursor.offset
            self._seen = recorded_keys(self.engine, self.log, cursor.offset)
            self.stream.reset(cursor.offset, cursor.line)
            self._read_header()
            self._new_recorder(cursor.dev, cursor.ino, resumed=True)
        self._read_at = 0.0

    def _new_recorder(self, dev: int, ino: int, resumed: bool) -> None:
        self.recorder = RequestRecorder(self.stream.server, self.log, dev, ino, resumed,
                                        self.answers, self._seen.__contains__)

    def _read_header(self) -> None:
        """On resume: the server's facts from the file's start-up lines."""
        head = self.follower.head(_HEADER_BYTES)
        m = _FIRST_TASK.search(head)
        head = head[:head.rfind(b"\n", 0, m.start()) + 1] if m is not None else head
        head = head[:head.rfind(b"\n") + 1]
        if head:
            probe = RecordStream()
            probe.feed(head, 0, 1)
            probe.take(force=True)
            merge_facts(self.stream.server, probe.server)

    def step(self) -> bool:
        """One poll; whether it read anything."""
        answered = self.answers.poll() if self.answers is not None else False
        chunks = self.follower.poll()
        self._gaps()
        for chunk in chunks:
            self._chunk(chunk)
        self._take(force=False)
        if self.recorder is not None and self.answers is not None:
            self._handle(self.recorder.ready(self.stream.counts))
        if chunks and time.monotonic() - self._saved_at >= SAVE_EVERY_S:
            self._save_cursor()
        return bool(chunks) or answered

    def _gaps(self) -> None:
        """Say each stretch of the log (or of the answers file) that could not be read,
        and count it."""
        followers = [self.follower] + ([self.answers.follower] if self.answers else [])
        for follower in followers:
            gaps, follower.gaps = follower.gaps, []
            for gap in gaps:
                self._lost(follower.path, gap)

    def _lost(self, path: Path, gap: Gap) -> None:
        self.tally.gaps += 1
        self.tally.lost_bytes += gap.lost or 0
        self.metrics.lost(gap)
        if self.emit is not None:
            self.emit({"lost": {"file": str(path), "dev": gap.dev, "ino": gap.ino,
                                "offset": gap.offset, "line": gap.line, "bytes": gap.lost,
                                "why": gap.why.value}})
        else:
            self.say(gap.text(path))

    def _chunk(self, chunk: Chunk) -> None:
        if chunk.switch is not None or self.recorder is None:
            if chunk.switch is not None:
                self._end_file(chunk.switch)
            self.stream.reset(chunk.start, chunk.line)
            self._new_recorder(chunk.dev, chunk.ino, resumed=chunk.start > 0)
        self._read_at = time.monotonic()
        self.stream.feed(chunk.data, chunk.start, chunk.line)

    def _end_file(self, why: Switch) -> None:
        """The file being read was replaced: read what it still held, and record the
        requests it leaves unfinished as incomplete (its server is gone)."""
        self.tally.switches.append(why.value)
        self._take(force=True)
        if self.recorder is not None:
            self._handle(self.recorder.stop(self.stream.counts))
        self._last_facts = self.stream.server

    def _take(self, force: bool) -> None:
        while self.recorder is not None:
            pieces = self.stream.take(force)
            if not pieces:
                return
            for piece in pieces:
                if piece.restart:
                    self._restarted(piece)
                if piece.server.build is None and piece.records:
                    merge_facts(piece.server, self._last_facts)  # a log with no start-up
                self._handle(self.recorder.feed(piece, self.stream.counts))
            if force:
                return

    def _restarted(self, piece: Piece) -> None:
        """A server started again in the file being read: the requests the one before left
        unfinished are recorded as incomplete (it is gone), and the new one's are folded
        from its own empty slots."""
        assert self.recorder is not None
        self.tally.switches.append(Switch.RESTARTED.value)
        self._handle(self.recorder.stop(self.stream.counts))
        self._last_facts = self.recorder.server
        self.recorder = RequestRecorder(piece.server, self.log, self.recorder.dev,
                                        self.recorder.ino, False, self.answers,
                                        self._seen.__contains__)

    def _handle(self, done: list[Request]) -> None:
        """Record (or hold) each request, judge it, report what is reported (a request cut
        by this watch's own stop is a `partial_request` note, below any --severity)."""
        for req in done:
            if req.key in self._seen:
                self._seen.discard(req.key)
                self.tally.skipped += 1
                continue
            if req.unanswered:
                self._unanswered(req)
            if req.answer is not None:
                a = req.answer
                note_answer(self.engine, self.answers_key, a.dev, a.ino, a.line)
            findings = judge(req)
            shown = reported(findings, self.opts.severity)
            self.metrics.request(req, findings)
            if self.ring is not None:
                self.ring.add(req)
                self.metrics.ring_rounds.set(self.ring.held_rounds)
                if not shown:
                    continue
                held = self.ring.drain()
                sid = 0
                for r in held:
                    sid = self._store(r, judge(r) if r is not req else findings)
                self.metrics.ring_rounds.set(0)
            else:
                sid = self._store(req, findings)
            for f in shown:
                self._report(f, req, sid)
        if done:
            self._save_cursor()
            now = time.monotonic()
            if now - self._pruned_at >= PRUNE_EVERY_S:
                self._pruned_at = now
                self.tally.pruned += prune(self.engine, self.log, self.opts.keep,
                                           self.opts.keep_for)

    def _store(self, req: Request, findings: list[Finding]) -> int:
        extra = {"log": self.log, "start": req.start, "task": req.task.task,
                 "slot": req.task.slot, "last_line": req.last_line, "last_t": req.last_t,
                 "findings": [f.to_dict() for f in findings]}
        if self.answers is not None:
            extra["answer"] = req.answer.facts.index if req.answer is not None else None
        sid = store_request(self.engine, self.log, req, extra)
        self.tally.recorded += 1
        self.tally.answered += req.answer is not None
        self.tally.incomplete += req.error is not None
        lag = time.monotonic() - self._read_at
        self.tally.lags.append(lag)
        self.metrics.lag.set(lag)
        return sid

    def _unanswered(self, req: Request) -> None:
        """Say that a request is recorded without its answer."""
        self.tally.unanswered += 1
        assert self.answers is not None
        doc = {"unanswered": {"task": req.task.task, "slot": req.task.slot,
                              "log_line": req.last_line, "responses": str(self.answers.path),
                              "wait_s": self.answers.wait_s}}
        if self.emit is not None:
            self.emit(doc)
        else:
            self.say(f"task {req.task.task} (slot {req.task.slot}, log line {req.last_line}): "
                     f"no answer in {self.answers.path} within {self.answers.wait_s:g} s, "
                     "recorded without it")

    def _report(self, f: Finding, req: Request, sid: int) -> None:
        self.tally.findings += 1
        doc = finding_doc(f, req, sid, self.log)
        if self.emit is not None:
            self.emit(doc)
        else:
            self.say(finding_line(doc))
        if self.hook is not None:
            self.hook.send(doc)

    def _save_cursor(self) -> None:
        """Save the offset reading resumes from: the first line of the oldest request
        still being served (what came before it is recorded), else the first line not
        yet read; and where reading the answers resumes from."""
        self._saved_at = time.monotonic()
        answers = self.answers.cursor() if self.answers is not None else None
        if answers is not None:
            save_cursor(self.engine, self.answers_key, answers)
            forget_answers(self.engine, self.answers_key, answers)
        cur = self.follower.cursor()
        if cur is None or self.recorder is None:
            return
        if (cur.dev, cur.ino) != (self.recorder.dev, self.recorder.ino):
            return  # the follower moved on to the next file; its first chunk saves it
        open_at = self.recorder.open_lines()
        offset, line = min(open_at) if open_at else (self.stream.offset, self.stream.line)
        save_cursor(self.engine, self.log, self.follower.cursor_at(offset, line))

    def finish(self) -> None:
        """Read what the log holds now, record the requests being served as incomplete,
        save the cursor at the end of what was read."""
        if self.answers is not None:
            self.answers.poll()
        for chunk in self.follower.poll():
            self._chunk(chunk)
        self._gaps()
        self._take(force=True)
        if self.recorder is not None:
            self._handle(self.recorder.stop(self.stream.counts))
            self._save_cursor()
        self.tally.pruned += prune(self.engine, self.log, self.opts.keep, self.opts.keep_for)
        if self.ring is not None:
            self.tally.ring_dropped += len(self.ring.drain())
        if self.hook is not None:
            self.hook.close()
        self.follower.close()
        if self.answers is not None:
            self.answers.close()

    def run(self, stop: threading.Event) -> WatchTally:
        """Poll until `stop` is set, then finish."""
        served = (self.metrics.serve(self.opts.metrics_port)
                  if self.opts.metrics_port is not None else None)
        try:
            while not stop.is_set():
                if not self.step():
                    stop.wait(self.opts.poll_s)
            self.finish()
        finally:
            if served is not None:
                served.shutdown()
        return self.tally


def answers_key(log: str, responses: Path) -> str:
    """Where a watch of `log` keeps its cursor and notes on the answers file (one file
    may hold the answers of several servers' clients)."""
    return f"{responses} (answers to {log})"


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set `stop` (the loop ends between two polls); a second one
    interrupts at once.

    The handler never sets `stop` itself: Python runs it in the main thread between two
    bytecodes, and one that lands while that thread holds the event's lock (inside
    `stop.wait`, checking the flag) would wait for that lock forever in `Event.set`, and
    every later signal's handler with it: a watch only SIGKILL ends. It hands the signal
    to a thread of its own through a `SimpleQueue`, whose `put` is reentrant, and that
    thread sets `stop`."""
    relay: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    caught: list[int] = []

    def handle(signum: int, _frame: FrameType | None) -> None:
        caught.append(signum)
        if len(caught) > 1:
            raise KeyboardInterrupt
        relay.put(signum)

    def forward() -> None:
        while relay.get() is not None:
            stop.set()

    setter = threading.Thread(target=forward, name="watch-signals", daemon=True)
    setter.start()
    old = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        relay.put(None)
        setter.join()
