"""The watch loop: each poll runs the watch's stages in turn. The intake reads the log and
cuts it into requests (intake.py); with --responses-from, the answers they wait for are
followed (answering.py); each request is judged by the postmortem's detectors
(findings.py), kept (keep.py: stored, or held in the ring; old sessions pruned) and
reported (report.py: printed, the hook, the metrics); then where reading got to is saved.

It stops between two polls when asked (SIGINT, SIGTERM, or the caller's `stop`), never
in the middle of a write: what the log had shown by then is read, each request still
being served is recorded as incomplete, and the cursor is saved where reading stopped,
so the next watch of the same log starts there and records no request twice."""

import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from eventlog import open_db
from specledger.watch.answering import AnswerStage
from specledger.watch.findings import judge, reported
from specledger.watch.intake import LogIntake
from specledger.watch.intervals.loop import IntervalWatcher
from specledger.watch.keep import Keeper
from specledger.watch.options import LogEngine, WatchOptions
from specledger.watch.polling import SAVE_EVERY_S, Polling
from specledger.watch.report import Reporter
from specledger.watch.requests import Request
from specledger.watch.store import ensure_tables
from specledger.watch.tally import WatchTally


class Watcher(Polling):
    """Follows one llama-server log into one ledger; `say` prints a line, `emit` a
    finding's JSON."""

    def __init__(self, opts: WatchOptions, say: Callable[[str], None],
                 emit: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.opts = opts
        engine = open_db(opts.db, create=True)
        ensure_tables(engine)
        self.tally = WatchTally()
        self.report = Reporter(opts, say, emit, self.tally)
        self.answers = (AnswerStage(engine, opts, opts.responses, self.tally, self.report.note)
                        if opts.responses is not None else None)
        self.intake = LogIntake(engine, opts, self.answers.feed if self.answers else None,
                                self.tally)
        self.keep = Keeper(engine, opts, self.answers is not None, self.tally)
        self._saved_at = 0.0

    def step(self) -> bool:
        """One poll; whether it read anything."""
        answered = self.answers.poll() if self.answers is not None else False
        chunks = self.intake.poll()
        self._say_gaps()
        self._handle(self.intake.feed(chunks) + self.intake.take())
        if chunks and time.monotonic() - self._saved_at >= SAVE_EVERY_S:
            self._save()
        return bool(chunks) or answered

    def _say_gaps(self) -> None:
        """Say what of the log (or of the answers file) could not be read."""
        self.say_gaps([self.intake.follower] + ([self.answers.feed.follower]
                                                if self.answers is not None else []))

    def _handle(self, done: list[Request]) -> None:
        """Each request through the stages: its answer settled, judged, kept, reported
        (a request cut by this watch's own stop is a `partial_request` note, below any
        --severity); then the cursors saved, and old sessions pruned."""
        for req in done:
            if self.answers is not None:
                self.answers.settle(req)
            findings = judge(req)
            shown = reported(findings, self.opts.severity)
            kept = self.keep.keep(req, findings, bool(shown), self.intake.read_at)
            self.report.request(req, findings, shown, kept)
        if done:
            self._save()
            self.keep.prune()

    def _save(self) -> None:
        """Save where reading the log, and the answers, resumes from."""
        self._saved_at = time.monotonic()
        if self.answers is not None:
            self.answers.save()
        self.intake.save()

    def finish(self) -> None:
        """Read what the log holds now, record the requests being served as incomplete,
        save the cursor at the end of what was read."""
        if self.answers is not None:
            self.answers.poll()
        self._handle(self.intake.feed(self.intake.poll()))
        self._say_gaps()
        stopped = self.intake.recorder is not None
        self._handle(self.intake.stop())
        if stopped:
            self._save()
        self.keep.finish()
        self.report.close()
        self.intake.close()
        if self.answers is not None:
            self.answers.close()


def make_watcher(opts: WatchOptions, say: Callable[[str], None],
                 emit: Callable[[dict[str, Any]], None] | None = None) -> Polling:
    """The watcher of `opts.engine`'s log: `Watcher` for llama-server's, `IntervalWatcher`
    for an engine's that reports intervals."""
    if opts.engine is LogEngine.LLAMA:
        return Watcher(opts, say, emit)
    return IntervalWatcher(opts, say, emit)


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
