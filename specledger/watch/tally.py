"""What one watch did, counted by its stages as they go: the summary `watch` prints when
it stops (and with --json, its `summary` document)."""

from collections import deque
from dataclasses import dataclass, field

LAGS_KEPT = 10_000


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
