"""A llama-server run's server-level lines: the HTTP answers it logs, the errors it sends
(a context exceeded, an exception while parsing a request), a KV cache that has no room for
a batch, a cancelled task, its shutdown, and the lines a dying process prints (an assert,
an abort, a segfault, a GPU fault, an allocation that failed). None of them is a step of a
slot's round; they are what a server's log says about its requests' fate and its own, at
any verbosity, and `ServerLog` keeps them for the run's postmortem
(eventlog/postmortem/server_log.py).
"""

import re
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

_EXAMPLES = 20  # events of each kind a run keeps (their count is kept whole)
_CAUSE_LINES = 20  # an HTTP error's cause: an error logged at most this many lines before it


class ServerEventKind(StrEnum):
    """What a server-level line says."""

    HTTP = "http"                          # log_server_r: done request: POST /path addr 500
    ERROR = "error"                        # send_error: task id = N, error: ...
    EXCEPTION = "exception"                # operator(): got exception: {"error": ...}
    KV_FULL = "kv_full"                    # failed to find free space in the KV cache
    CONTEXT_EXCEEDED = "context_exceeded"  # Context size has been exceeded
    CANCEL = "cancel"                      # stop: cancel task, id_task = N
    SHUTDOWN = "shutdown"                  # cleaning up before exit / exiting
    CRASH = "crash"                        # GGML_ASSERT, abort, segfault, GPU fault, OOM


@dataclass(frozen=True)
class ServerEvent:
    """One server-level line: its kind, where it is, the task it names (None: none),
    an HTTP status (HTTP; EXCEPTION: the error's code) and its text (the request path, the
    error message, the crash line)."""

    kind: ServerEventKind
    line: int
    t: float | None
    task: int | None = None
    status: int | None = None
    text: str = ""

    @property
    def shutdown(self) -> bool:
        """Whether the line is the server shutting down."""
        return self.kind is ServerEventKind.SHUTDOWN

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the stored source's `server_log`)."""
        return {"kind": self.kind.value, "line": self.line, "t": self.t, "task": self.task,
                "status": self.status, "text": self.text}


_I = r"(-?\d+)"
_LINES: tuple[tuple[re.Pattern[str], ServerEventKind], ...] = tuple(
    (re.compile(p), k) for p, k in (
        # `done request` from 0.3.x and forks; `request:` with a status before.
        (r"log_server_r: (?:done )?request: (\S+ \S+) \S+ (\d{3})\s*$", ServerEventKind.HTTP),
        (rf"send_error: task id = {_I}, error: (.*)$", ServerEventKind.ERROR),
        (r"got exception: (.*)$", ServerEventKind.EXCEPTION),
        (r"failed to find free space in the KV cache", ServerEventKind.KV_FULL),
        (r"^(?:srv\s+\w+: )?Context size has been exceeded", ServerEventKind.CONTEXT_EXCEEDED),
        (rf"stop: cancel task, id_task = {_I}", ServerEventKind.CANCEL),
        # ik_llama.cpp's only one is its task loop's end, -v (its structured message).
        (r"cleaning up before exit|^(?:srv\s+)?main: exiting due to|received (?:SIGINT|SIGTERM)"
         r"|^(?:srv\s+)?main: (?:HTTP )?server (?:is )?(?:stopped|shutting down)"
         r"|^ending start_loop$", ServerEventKind.SHUTDOWN),
    )
)
_CODE = re.compile(r'"code"\s*:\s*(\d{3})')
_MESSAGE = re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)')
_CRASH = re.compile(
    r"GGML_ASSERT|GGML_ABORT|Segmentation fault|SIGSEGV|SIGABRT|Aborted(?: \(core dumped\))?$"
    r"|core dumped|terminate called|std::bad_alloc|Illegal instruction|Bus error"
    r"|CUDA error|HIP error|ROCm error|Vulkan error|Memory access fault|out of memory"
    r"|cudaMalloc failed|fatal error|Killed$")


# Words one of _LINES holds: most lines hold none, and a substring test costs less than
# a search of each pattern.
_WORDS = ("request: ", "send_error", "got exception", "free space", "Context size",
          "cancel task", "cleaning up", "exiting", "received SIG", "server is stopped",
          "shutting down", "ending start_loop")


def server_line(text: str, line: int, t: float | None) -> ServerEvent | None:
    """The server-level event a line body holds, or None."""
    if not any(w in text for w in _WORDS):
        return None
    found = next(((m, k) for p, k in _LINES if (m := p.search(text)) is not None), None)
    if found is None:
        return None
    m, kind = found
    if kind is ServerEventKind.HTTP:
        return ServerEvent(kind, line, t, status=int(m.group(2)), text=m.group(1))
    if kind in (ServerEventKind.ERROR, ServerEventKind.CANCEL):
        return ServerEvent(kind, line, t, task=int(m.group(1)),
                           text=m.group(2).strip() if kind is ServerEventKind.ERROR else "")
    if kind is ServerEventKind.EXCEPTION:
        body = m.group(1)
        code, message = _CODE.search(body), _MESSAGE.search(body)
        return ServerEvent(kind, line, t, status=int(code.group(1)) if code else None,
                           text=message.group(1) if message else body[:200])
    return ServerEvent(kind, line, t, text=text.strip()[:200])


def crash_line(text: str, line: int, t: float | None) -> ServerEvent | None:
    """The crash event of a line a dying process prints (an assert, an abort, a segfault,
    a GPU fault, an allocation that failed), or None."""
    if _CRASH.search(text) is None:
        return None
    return ServerEvent(ServerEventKind.CRASH, line, t, text=text.strip()[:300])


@dataclass
class HttpError:
    """An HTTP answer other than success and the error logged just before it, if any
    (`cause`: a `send_error` or an exception; None: the log gives none)."""

    answer: ServerEvent
    cause: ServerEvent | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        c = self.cause
        return {"status": self.answer.status, "request": self.answer.text,
                "line": self.answer.line, "t": self.answer.t,
                "cause": c.text if c is not None else None,
                "task": c.task if c is not None else None}


@dataclass
class ServerLog:
    """A run's server-level events: how many of each kind, the HTTP statuses answered, the
    first events of each kind (every one but the 2xx answers), and the HTTP errors with
    their causes."""

    counts: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    events: list[ServerEvent] = field(default_factory=list)
    http_errors: list[HttpError] = field(default_factory=list)
    error_causes: Counter[tuple[int, str]] = field(default_factory=Counter)
    _pending: list[ServerEvent] = field(default_factory=list)

    def add(self, event: ServerEvent) -> None:
        """Keep one event."""
        self.counts[event.kind.value] += 1
        if event.kind in (ServerEventKind.ERROR, ServerEventKind.EXCEPTION):
            self._pending = [*self._pending[-7:], event]
        if event.kind is ServerEventKind.HTTP:
            assert event.status is not None
            self.statuses[event.status] += 1
            if event.status < 400:
                return
            self._http_error(event)
        if self.counts[event.kind.value] <= _EXAMPLES:
            self.events.append(event)

    def _http_error(self, answer: ServerEvent) -> None:
        recent = [e for e in self._pending if answer.line - e.line <= _CAUSE_LINES]
        cause = recent[0] if recent else None
        if cause is not None:
            self._pending.remove(cause)
        self.error_causes[(answer.status or 0, cause.text if cause else "not logged")] += 1
        if len(self.http_errors) < _EXAMPLES:
            self.http_errors.append(HttpError(answer, cause))

    def of(self, kind: ServerEventKind) -> list[ServerEvent]:
        """The kept events of one kind, in line order."""
        return [e for e in self.events if e.kind is kind]

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the stored source's `server_log`)."""
        return {"counts": dict(self.counts),
                "statuses": {str(s): n for s, n in sorted(self.statuses.items())},
                "events": [e.to_dict() for e in self.events],
                "http_errors": [h.to_dict() for h in self.http_errors],
                "error_causes": [{"status": st, "cause": c, "count": n}
                                 for (st, c), n in self.error_causes.most_common()]}
