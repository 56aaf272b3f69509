"""The watch's counters in Prometheus's text format (prometheus_client), on a registry of
its own: requests, rounds, drafts made and accepted per drafter and per draft position,
re-prefilled tokens, restores, livelocks and findings by kind, how far behind the log the
ledger is, and what of the log could not be read."""

from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    disable_created_metrics,
    start_http_server,
)

from eventlog.postmortem.finding import Finding, Kind
from specledger.watch.follower import Gap
from specledger.watch.requests import Request

PREFIX = "specledger_watch"


class WatchMetrics:
    """The counters of one watch."""

    def __init__(self) -> None:
        disable_created_metrics()  # a `_created` sample per counter says nothing here
        r = self.registry = CollectorRegistry()
        self.requests = Counter(f"{PREFIX}_requests", "Requests recorded, by how they ended",
                                ["status"], registry=r)
        self.rounds = Counter(f"{PREFIX}_rounds", "Rounds (verify batches and plain steps) "
                              "of the recorded requests", registry=r)
        self.drafted = Counter(f"{PREFIX}_drafted_tokens", "Draft tokens verified, by drafter",
                               ["drafter"], registry=r)
        self.accepted = Counter(f"{PREFIX}_accepted_tokens", "Draft tokens accepted, by "
                                "drafter", ["drafter"], registry=r)
        self.pos_drafted = Counter(f"{PREFIX}_position_drafted", "Rounds that drafted a "
                                   "token at this draft position (0-based)", ["position"],
                                   registry=r)
        self.pos_accepted = Counter(f"{PREFIX}_position_accepted", "Rounds that accepted the "
                                    "draft token at this position (0-based)", ["position"],
                                    registry=r)
        self.reprefilled = Counter(f"{PREFIX}_reprefilled_tokens", "History tokens prefilled "
                                   "again after a context restore", registry=r)
        self.restores = Counter(f"{PREFIX}_restores", "Checkpoint restores, by kind "
                                "(speculative, context)", ["kind"], registry=r)
        self.livelocks = Counter(f"{PREFIX}_livelocks", "Replay livelocks found", registry=r)
        self.findings = Counter(f"{PREFIX}_findings", "Findings, by kind and severity",
                                ["kind", "severity"], registry=r)
        self.lag = Gauge(f"{PREFIX}_lag_seconds", "From reading a request's last log line "
                         "to its session committed, for the last request", registry=r)
        self.gaps = Counter(f"{PREFIX}_gaps", "Stretches of the log that could not be read, "
                            "by why", ["why"], registry=r)
        self.lost_bytes = Counter(f"{PREFIX}_lost_bytes", "Bytes of the log known lost "
                                  "unread (a gap of unknown size adds none)", registry=r)
        self.ring_rounds = Gauge(f"{PREFIX}_ring_rounds", "Rounds held in memory (--ring)",
                                 registry=r)

    def request(self, req: Request, findings: list[Finding]) -> None:
        """Count one recorded (or, in ring mode, held) request and its findings."""
        self.requests.labels("incomplete" if req.error is not None else "finished").inc()
        for rnd in req.rounds:
            self.drafted.labels(rnd.drafter).inc(rnd.drafted)
            self.accepted.labels(rnd.drafter).inc(rnd.accepted)
            for pos in range(rnd.drafted):
                self.pos_drafted.labels(str(pos)).inc()
                if pos < rnd.accepted:
                    self.pos_accepted.labels(str(pos)).inc()
        m = req.metrics
        if m is not None:  # a figure the log does not show (no -v) is None: not counted
            self.rounds.inc(m.rounds or 0)
            self.reprefilled.inc(m.reprefill_tokens or 0)
            self.restores.labels("speculative").inc(m.restores or 0)
            self.restores.labels("context").inc(m.ctx_restores or 0)
        for f in findings:
            self.findings.labels(f.kind.value, f.severity.value).inc()
            if f.kind is Kind.REPLAY_LIVELOCK:
                self.livelocks.inc()

    def lost(self, gap: Gap) -> None:
        """Count one stretch of the log that could not be read."""
        self.gaps.labels(gap.why.value).inc()
        self.lost_bytes.inc(gap.lost or 0)

    def serve(self, port: int, host: str = "127.0.0.1") -> Any:
        """Serve `/metrics` on `host:port` from a background thread; the server."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        return server

    def value(self, name: str, **labels: str) -> float:
        """One sample's value (0 when it has none yet)."""
        got = self.registry.get_sample_value(name, labels)
        return got if got is not None else 0.0
