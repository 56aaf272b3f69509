"""What a watch is told, validated once at the edge (the CLI): the typed options every
stage of the watch reads its own part of."""

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import Path

from eventlog.postmortem.finding import Severity
from specledger.watch.follower import READ_LIMIT


class LogEngine(StrEnum):
    """Whose log is followed: llama-server's (a request at a time), or an engine's that
    reports intervals (vLLM's stats lines, SGLang's batch lines: a run at a time)."""

    LLAMA = "llama"
    VLLM = "vllm"
    SGLANG = "sglang"


@dataclass(frozen=True)
class WatchOptions:
    """What to follow and keep: the log, the ledger, the hook, the metrics port, the
    bounds (`keep` sessions, sessions younger than `keep_for`, `ring` rounds per slot
    held in memory), the lowest severity reported (`severity`), the poll period, and the
    clients' answers file (`responses`) with how long a request waits for its answer, and
    the most bytes one poll reads (`read_limit`: a backlog takes as many polls as it needs),
    and whose log it is (`engine`)."""

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
    engine: LogEngine = LogEngine.LLAMA
