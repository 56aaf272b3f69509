"""The watch's second stage: keep each request as a session of the ledger, with its
findings and its place in the log (store.py), or, in ring mode, hold it in memory until
a finding fires and write what the ring holds then (ring.py); and prune the log's old
sessions (--keep, --keep-for: prune.py), at most once a PRUNE_EVERY_S while requests
land, and when the watch stops."""

import time
from dataclasses import dataclass

from sqlalchemy import Engine

from eventlog.postmortem.finding import Finding
from specledger.watch.options import WatchOptions
from specledger.watch.prune import prune
from specledger.watch.requests import Request
from specledger.watch.ring import Ring
from specledger.watch.store import store_request
from specledger.watch.tally import WatchTally

PRUNE_EVERY_S = 1.0  # a busy server completes many requests a second: prune once for them


@dataclass(frozen=True)
class Kept:
    """What keeping one request did: the session it was written to (None: it is held in
    the ring), the lag of the last session written (from the last chunk read to its
    commit; None: none was written), and the rounds the ring holds now (None: no ring)."""

    session: int | None
    lag: float | None
    ring_rounds: int | None


class Keeper:
    """Keeps the requests of `opts.log` in the ledger behind `engine`, within
    `opts.keep`, `opts.keep_for` and, with `opts.ring`, in the ring; `answers`: whether
    the answers are followed (each session then says which it was checked against)."""

    def __init__(self, engine: Engine, opts: WatchOptions, answers: bool,
                 tally: WatchTally) -> None:
        self.engine, self.opts, self.answers, self.tally = engine, opts, answers, tally
        self.log = str(opts.log)
        self.ring = Ring(opts.ring) if opts.ring is not None else None
        self._pruned_at = 0.0

    def keep(self, req: Request, findings: list[Finding], fire: bool,
             read_at: float) -> Kept:
        """Write `req` (with its `findings`), or hold it in the ring and, when it
        `fire`s, write every request the ring holds; `read_at`: when the last chunk was
        read."""
        if self.ring is None:
            return Kept(*self._store(req, findings, read_at), None)
        self.ring.add(req, findings)
        if not fire:
            return Kept(None, None, self.ring.held_rounds)
        session, lag = None, None
        for held, found in self.ring.drain():
            sid, lag = self._store(held, found, read_at)
            if held is req:
                session = sid
        return Kept(session, lag, self.ring.held_rounds)

    def _store(self, req: Request, findings: list[Finding],
               read_at: float) -> tuple[int, float]:
        """Write one request; its session and lag."""
        extra = {"log": self.log, "start": req.start, "task": req.task.task,
                 "slot": req.task.slot, "last_line": req.last_line, "last_t": req.last_t,
                 "findings": [f.to_dict() for f in findings]}
        if self.answers:
            extra["answer"] = req.answer.facts.index if req.answer is not None else None
        sid = store_request(self.engine, self.log, req, extra)
        self.tally.recorded += 1
        self.tally.answered += req.answer is not None
        self.tally.incomplete += req.error is not None
        lag = time.monotonic() - read_at
        self.tally.lags.append(lag)
        return sid, lag

    def prune(self, now: bool = False) -> None:
        """Delete the log's sessions beyond the bounds: at once when `now`, else at most
        once a PRUNE_EVERY_S."""
        when = time.monotonic()
        if not now:
            if when - self._pruned_at < PRUNE_EVERY_S:
                return
            self._pruned_at = when
        self.tally.pruned += prune(self.engine, self.log, self.opts.keep, self.opts.keep_for)

    def finish(self) -> None:
        """Prune a last time; what the ring still holds is dropped (nothing fired)."""
        self.prune(now=True)
        if self.ring is not None:
            self.tally.ring_dropped += len(self.ring.drain())
