"""The batching suite's points: one recorded session read back into its aggregate
throughput, and where speculation stops paying against plain decoding.

Aggregate tok/s = the committed answer tokens of all slots (their turns' generated tokens)
over the session's clock time: the latest event time, on the backend's clock (simulated
seconds on the sim, wall seconds on torch), prefill included. On torch the same tokens over
the process's CPU seconds during the run (recording included, the backend's construction
not) say the same without the waits that other jobs on a shared CPU add to the wall clock
(one torch thread: CPU seconds are the work).
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine

from engine.config import BackendKind, RunConfig
from engine.session import make_backend
from eventlog.reader import scan_events
from specledger.api import run_session
from viz.batching import ForwardCollector, summarize

PLAIN = "plain"
"""The variant name of plain decoding (drafter `none`): the baseline of each slot count."""


@dataclass(frozen=True)
class Point:
    """One recorded session: backend, model or profile, schedule, drafter (`none` for
    plain), variant (`plain` or a rollback strategy), slots; what it committed, on which
    clock, and the forwards it shared (0 under the sequential schedule)."""

    backend: str
    profile: str
    schedule: str
    drafter: str
    variant: str
    slots: int
    session: int
    tokens: int
    clock_s: float
    cpu_s: float
    forwards: int
    mean_slots: float
    mean_tokens: float
    acceptance: float

    @property
    def tok_s(self) -> float:
        """Aggregate committed answer tokens per second of the session's clock."""
        return self.tokens / self.clock_s if self.clock_s > 0 else 0.0

    @property
    def tok_cpu_s(self) -> float:
        """Aggregate committed answer tokens per CPU second of the run."""
        return self.tokens / self.cpu_s if self.cpu_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping with the throughputs."""
        return asdict(self) | {"tok_s": self.tok_s, "tok_cpu_s": self.tok_cpu_s}


Rate = Callable[[Point], float]
"""Which throughput a comparison reads: `Point.tok_s` (the clock) or `Point.tok_cpu_s`."""


def wall(pt: Point) -> float:
    """The clock's throughput."""
    return pt.tok_s


def cpu(pt: Point) -> float:
    """The CPU seconds' throughput."""
    return pt.tok_cpu_s


def measure(config: RunConfig, db: str, log: Engine) -> Point:
    """Run and record `config`, then read its throughput and forwards from its events."""
    backend = make_backend(config)  # outside the CPU time: loading is not decoding
    start = time.process_time()
    result = run_session(config, db, backend=backend)
    cpu_s = time.process_time() - start
    clock = 0.0
    collector = ForwardCollector()
    for ev in scan_events(log, result.session_id):
        clock = max(clock, ev.t)
        collector.add(ev)
    s = summarize(collector.forwards)
    drafted = sum(t.drafted for t in result.turns)
    accepted = sum(t.accepted for t in result.turns)
    return Point(
        backend=config.backend.value,
        profile=config.profile if config.backend is BackendKind.SIM else config.model,
        schedule=config.schedule.value, drafter=config.drafter,
        variant=PLAIN if config.drafter == "none" else config.strategy.value,
        slots=config.slots, session=result.session_id,
        tokens=sum(t.generated_tokens for t in result.turns), clock_s=clock, cpu_s=cpu_s,
        forwards=s.forwards if s else 0, mean_slots=s.mean_slots if s else 1.0,
        mean_tokens=s.mean_tokens if s else 0.0,
        acceptance=accepted / drafted if drafted else 0.0)


def stops_paying(points: Sequence[Point], rate: Rate = wall) -> dict[str, str]:
    """Per speculative variant, the smallest slot count at which its aggregate `rate` falls
    below plain decoding's at the same slots (the points given: one backend, profile,
    schedule and drafter, and plain decoding), or "> N" (N: the most slots measured) where
    it never does."""
    plain = {pt.slots: rate(pt) for pt in points if pt.variant == PLAIN}
    out: dict[str, str] = {}
    for variant in dict.fromkeys(pt.variant for pt in points if pt.variant != PLAIN):
        mine = sorted((pt.slots, rate(pt)) for pt in points if pt.variant == variant)
        below = [n for n, tps in mine if n in plain and tps < plain[n]]
        out[variant] = str(below[0]) if below else f"> {max(n for n, _ in mine)}"
    return out
