"""What an SGLang server log says, as typed records: the scheduler's periodic batch lines,
HTTP answers, finished requests (`--log-requests`), crashes with their tracebacks, the
process's lifecycle lines, and one server run holding them all. Every field holds what its
line printed, None where the line has no such field: nothing is derived here."""

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from adapters.sglang.log.args import ServerInfo


class BatchKind(StrEnum):
    """Which scheduler line: a prefill batch (`Prefill batch`) or the decode summary the
    scheduler prints every `decode_log_interval` steps (`Decode batch`)."""

    PREFILL = "prefill"
    DECODE = "decode"


@dataclass
class Batch:
    """One `Prefill batch` / `Decode batch` line (`clock`: the logger's time, as printed;
    `rank`: its rank tags, `TP0`, `DP1 TP1 EP1`). Token counts as printed: `#token` (one
    KV pool) and `#full token` (a hybrid model's full-attention pool) are kept apart, as
    are `token usage` and `full token usage`. `graph` is the `cuda graph` / `npu graph`
    flag (`graph_device` says which); `cache_hit_rate` is the old prefill line's percent."""

    kind: BatchKind
    line: int
    clock: str | None
    rank: str | None
    running_req: int | None = None
    queue_req: int | None = None
    token: int | None = None
    token_usage: float | None = None
    full_token: int | None = None
    full_token_usage: float | None = None
    swa_token: int | None = None
    swa_token_usage: float | None = None
    mamba_num: int | None = None
    mamba_usage: float | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    graph: bool | None = None
    graph_device: str | None = None
    gen_throughput: float | None = None
    new_seq: int | None = None
    new_token: int | None = None
    cached_token: int | None = None
    cache_hit_rate: float | None = None
    pending_token: int | None = None
    input_throughput: float | None = None
    other: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HttpAnswer:
    """An uvicorn access line: `INFO:     host:port - "METHOD PATH HTTP/1.1" STATUS REASON`."""

    line: int
    clock: str | None
    client: str
    method: str
    path: str
    status: int
    reason: str


@dataclass(frozen=True)
class FinishedRequest:
    """A `Finish: obj=…, out=…` line (`--log-requests`): the request's id and the counts its
    `meta_info` printed (None where that level of logging leaves them out)."""

    line: int
    clock: str | None
    rid: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    spec_verify_ct: int | None
    finish_reason: str | None
    e2e_latency: float | None


@dataclass(frozen=True)
class ReceivedRequest:
    """A `Receive: obj=…` line (`--log-requests`): a request the server took, by its id."""

    line: int
    clock: str | None
    rid: str


@dataclass
class Crash:
    """A process that `hit an exception` (the scheduler, a TP worker, the detokenizer): the
    line, who, its rank, the traceback lines that followed, and the exception line closing
    the traceback where the log holds it."""

    line: int
    clock: str | None
    rank: str | None
    who: str
    traceback: list[str] = field(default_factory=list)
    exception: str | None = None
    last_lines: list[str] = field(default_factory=list)


class LifeKind(StrEnum):
    """A line in a server process's life: it is ready, told to stop, a child died, it kills
    its process tree (the last line of a shutdown, planned or not), or Python's interpreter
    exited (its `resource_tracker` warns of leaked semaphores at shutdown)."""

    READY = "ready"
    SIGTERM = "sigterm"
    SIGQUIT = "sigquit"
    CHILD_EXIT = "child_exit"
    KILL_TREE = "kill_tree"
    EXITED = "exited"


@dataclass(frozen=True)
class LifeEvent:
    """One lifecycle line; `detail` what it names (the child and its exit code)."""

    kind: LifeKind
    line: int
    clock: str | None
    detail: str


class RunEnd(StrEnum):
    """How a server run ends in the file: a scheduler or worker crash (`crashed`), its
    shutdown lines without one (`shutdown`), a child's death without a traceback
    (`died`: SIGQUIT, or another start follows), or the file ends (`log_ends`)."""

    CRASHED = "crashed"
    SHUTDOWN = "shutdown"
    DIED = "died"
    LOG_ENDS = "log_ends"


@dataclass
class SglangRun:
    """One server run: its records in line order, its settings, how its lines were counted
    and where it lies in the file (`first_line`..`last_line`; `pid` where uvicorn named
    the process)."""

    index: int
    first_line: int
    last_line: int
    server: ServerInfo = field(default_factory=ServerInfo)
    batches: list[Batch] = field(default_factory=list)
    http: list[HttpAnswer] = field(default_factory=list)
    finished: list[FinishedRequest] = field(default_factory=list)
    received: list[ReceivedRequest] = field(default_factory=list)
    crashes: list[Crash] = field(default_factory=list)
    life: list[LifeEvent] = field(default_factory=list)
    pid: int | None = None
    parsed: int = 0
    skipped: int = 0
    unknown: int = 0
    unknown_shapes: Counter[str] = field(default_factory=Counter)
    ending: RunEnd = RunEnd.LOG_ENDS
    last_lines: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        """Whether the server said it was ready to serve."""
        return any(e.kind is LifeKind.READY for e in self.life)
