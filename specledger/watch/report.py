"""The watch's third stage: say what it found. A finding at least as severe as
--severity is printed as one line (or as JSON with --json) and handed to the
--on-finding hook (findings.py); every request and finding is counted in the Prometheus
metrics (metrics.py); what could not be read, and a request recorded without its
answer, are said the same way, a line or a JSON document."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

from eventlog.postmortem.finding import Finding
from specledger.watch.findings import FindingHook, finding_doc, finding_line
from specledger.watch.follower import Gap
from specledger.watch.keep import Kept
from specledger.watch.metrics import WatchMetrics
from specledger.watch.options import WatchOptions
from specledger.watch.requests import Request
from specledger.watch.tally import WatchTally


class Reporter:
    """Reports what the watch of `opts.log` finds: `say` prints a line, `emit` (with
    --json) a document instead."""

    def __init__(self, opts: WatchOptions, say: Callable[[str], None],
                 emit: Callable[[dict[str, Any]], None] | None,
                 tally: WatchTally) -> None:
        self.log, self.say, self.emit, self.tally = str(opts.log), say, emit, tally
        self.metrics = WatchMetrics()
        self.hook = FindingHook(opts.on_finding) if opts.on_finding else None

    def note(self, doc: dict[str, Any], text: str) -> None:
        """Say one thing: `doc` with --json, else `text`."""
        if self.emit is not None:
            self.emit(doc)
        else:
            self.say(text)

    def lost(self, path: Path, gap: Gap) -> None:
        """Say a stretch of the log (or of the answers file) that could not be read, and
        count it."""
        self.tally.gaps += 1
        self.tally.lost_bytes += gap.lost or 0
        self.metrics.lost(gap)
        self.note({"lost": {"file": str(path), "dev": gap.dev, "ino": gap.ino,
                            "offset": gap.offset, "line": gap.line, "bytes": gap.lost,
                            "why": gap.why.value}}, gap.text(path))

    def request(self, req: Request, findings: list[Finding], shown: list[Finding],
                kept: Kept) -> None:
        """Count `req` and its `findings`, and what keeping it did; report those `shown`
        against the session it was kept in."""
        self.metrics.request(req, findings)
        if kept.ring_rounds is not None:
            self.metrics.ring_rounds.set(kept.ring_rounds)
        if kept.lag is not None:
            self.metrics.lag.set(kept.lag)
        for f in shown:
            doc = finding_doc(f, req, kept.session, self.log)
            self.finding(doc, finding_line)

    def finding(self, doc: dict[str, Any], line: Callable[[dict[str, Any]], str]) -> None:
        """Report one finding: `doc` with --json, else its `line`; and to the hook."""
        self.tally.findings += 1
        if self.emit is not None:
            self.emit(doc)
        else:
            self.say(line(doc))
        if self.hook is not None:
            self.hook.send(doc)

    def close(self) -> None:
        """Let the hook's queued findings go out."""
        if self.hook is not None:
            self.hook.close()
