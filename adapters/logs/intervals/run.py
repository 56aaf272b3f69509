"""What an engine's log reader makes of one server run that reports aggregates, not rounds
(vLLM's periodic stats lines, SGLang's batch lines): the typed lines an interval session is
recorded from (adapters/logs/intervals/record.py). A reader fills these with exactly the
figures its lines give; a figure a line does not give stays None, nothing is inferred.
"""

from collections import Counter
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from adapters.logs.compressed import GzipCut
from fsm.payloads import Interval


class IntervalKind(StrEnum):
    """Which line(s) an interval comes from."""

    ENGINE = "engine"                # vLLM `Engine NNN:` (with its `SpecDecoding` line, if any)
    SPEC = "spec"                    # vLLM `SpecDecoding metrics:` with no stats line beside it
    PREFILL_BATCH = "prefill_batch"  # SGLang `Prefill batch.`
    DECODE_BATCH = "decode_batch"    # SGLang `Decode batch.`


class RunEnding(StrEnum):
    """How a server run ends in its log."""

    SHUTDOWN = "shutdown"    # its shutdown lines
    DIED = "died"            # a fatal error, or a later start with no shutdown between
    LOG_ENDS = "log_ends"    # still running where the log ends


class FailureKind(StrEnum):
    """A failure an engine's log names."""

    ENGINE_DIED = "engine_died"        # the engine core's fatal error (vLLM EngineCore)
    WORKER_DIED = "worker_died"        # a worker process died
    STARTUP_FAILED = "startup_failed"  # the engine failed to start
    SCHEDULER_CRASH = "scheduler_crash"  # SGLang's scheduler hit an exception


@dataclass
class IntervalLine:
    """One interval: the payload's figures (fsm.payloads.Interval) and `at`, the line's
    time in seconds on the log's clock (None: the line shows none)."""

    line: int
    kind: IntervalKind
    clock: str | None = None
    at: float | None = None
    engine: int | None = None
    prompt_tps: float | None = None
    generation_tps: float | None = None
    running: int | None = None
    waiting: int | None = None
    kv_usage: float | None = None
    prefix_hit_rate: float | None = None
    mean_accept_len: float | None = None
    accepted_tps: float | None = None
    drafted_tps: float | None = None
    accepted: int | None = None
    drafted: int | None = None
    acc_per_pos: list[float] | None = None
    draft_acceptance: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Engine-specific figures, under the payload's optional keys (`tokens`, `new_seqs`,
    `new_tokens`, `cached_tokens`, `mm_hit_rate`, `preemptions`)."""

    @property
    def speculative(self) -> bool:
        """Whether the interval carries draft figures."""
        return self.drafted is not None or self.mean_accept_len is not None

    def payload(self) -> Interval:
        """The interval's event payload."""
        row = asdict(self)
        del row["at"], row["extra"]
        row["kind"] = self.kind.value
        return Interval(**row, **self.extra)  # type: ignore[typeddict-item]


@dataclass
class RequestLine:
    """One request the log shows (an HTTP access line, a finished-request line): what it
    gives of it, None where it gives nothing."""

    line: int
    clock: str | None = None
    at: float | None = None
    status: int | None = None
    method: str | None = None
    path: str | None = None
    request_id: str | None = None
    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    cached_tokens: int | None = None

    @property
    def failed(self) -> bool:
        """Whether the server answered it with an error status."""
        return self.status is not None and self.status >= 400


@dataclass
class Failure:
    """A failure the log names: its kind, where, the message (the exception's last line,
    where the log shows one), the last lines before it, and the requests it was serving
    (their ids where the log names them, else how many were running)."""

    kind: FailureKind
    line: int
    clock: str | None
    message: str
    last_lines: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    running: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (stored in the session's source)."""
        return {**asdict(self), "kind": self.kind.value}


@dataclass
class ServerRun:
    """One server process's run in a log: where it lies, how it ends, what its start-up
    lines say (None: not shown), its intervals, requests and failures, and how its lines
    were counted."""

    engine: str
    index: int
    first_line: int
    last_line: int = 0
    pid: int | None = None
    ending: RunEnding = RunEnding.LOG_ENDS
    version: str | None = None
    model: str | None = None
    architecture: str | None = None
    hybrid: bool | None = None
    method: str | None = None
    num_spec_tokens: int | None = None
    prefix_caching: bool | None = None
    intervals: list[IntervalLine] = field(default_factory=list)
    requests: list[RequestLine] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    last_lines: list[str] = field(default_factory=list)
    parsed: int = 0
    skipped: int = 0
    unknown: int = 0
    unknown_shapes: Counter[str] = field(default_factory=Counter)

    @property
    def lines(self) -> int:
        """Physical lines the run spans."""
        return self.last_line - self.first_line + 1 if self.last_line else 0

    @property
    def records_anything(self) -> bool:
        """Whether the run is worth a session: an interval, a request or a failure."""
        return bool(self.intervals or self.requests or self.failures)


@dataclass
class IntervalLog:
    """A log source read into its server runs, in the order each began: its name, its
    physical lines, the digest of its text, a last line cut mid-write, a cut gzip stream,
    and an example of each outer prefix its lines carry."""

    name: str
    runs: list[ServerRun]
    lines: int
    sha256: str
    partial_line: int | None = None
    gzip_cut: GzipCut | None = None
    prefixes: list[str] = field(default_factory=list)

    def unknown_shapes(self, n: int = 10) -> list[tuple[str, int]]:
        """The `n` most common shapes of unknown lines, over every run."""
        total: Counter[str] = Counter()
        for r in self.runs:
            total.update(r.unknown_shapes)
        return total.most_common(n)
