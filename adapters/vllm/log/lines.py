"""vLLM's line grammar: `(APIServer pid=1) INFO 05-30 07:09:38 [file.py:12] message`, the
process tag optional (a process's first lines, the engine before V1), uvicorn's access and
lifecycle lines (`(APIServer pid=1) INFO:     127.0.0.1:37582 - "POST /v1/... HTTP/1.1" 200
OK`), and a process's untagged output (a traceback printed to stderr, a progress bar)
behind its process tag alone."""

import calendar
import re
from dataclasses import dataclass

TAG = re.compile(r"\([A-Za-z][\w-]* pid=\d+\) |(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
                 r"\d\d-\d\d \d\d:\d\d:\d\d ")
"""What a vLLM line's body starts with: its process tag, else its level and time (what
adapters/logs/prefix.py learns a file's outer prefixes before)."""

_PROCESS = re.compile(r"^\((?P<proc>[A-Za-z][\w-]*) pid=(?P<pid>\d+)\) ?")
_LOGGED = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<clock>(?P<mo>\d\d)-"
                     r"(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)) "
                     r"(?:\[(?P<where>[^\]]+)\] ?)?")
_UVICORN = re.compile(r"^(?P<level>INFO|WARNING|ERROR):\s+")
_ACCESS = re.compile(r'^(?P<client>\S+) - "(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" '
                     r"(?P<status>\d{3})")


@dataclass(frozen=True, slots=True)
class Line:
    """A line's parts: its process (`APIServer`, `EngineCore`, `EngineCore_DP0`,
    `Worker_TP3`, ...; None: untagged), level (None: untagged output), clock as printed and
    in seconds (the year unknown: from 1970), source location, and message."""

    proc: str | None
    pid: int | None
    level: str | None
    clock: str | None
    at: float | None
    where: str | None
    message: str
    uvicorn: bool = False

    @property
    def tagged(self) -> bool:
        """Whether the line has any shape of vLLM's (a process tag or a level)."""
        return self.proc is not None or self.level is not None


def split_line(body: str) -> Line:
    """A line's body (its outer prefix removed) into its parts."""
    proc = pid = None
    m = _PROCESS.match(body)
    if m is not None:
        proc, pid = m.group("proc"), int(m.group("pid"))
        body = body[m.end():]
    m = _LOGGED.match(body)
    if m is not None:
        at = float(calendar.timegm((1970, int(m.group("mo")), int(m.group("d")),
                                    int(m.group("h")), int(m.group("mi")),
                                    int(m.group("s")), 0, 0, 0)))
        return Line(proc, pid, m.group("level"), m.group("clock"), at, m.group("where"),
                    body[m.end():])
    m = _UVICORN.match(body)
    if m is not None:
        return Line(proc, pid, m.group("level"), None, None, None, body[m.end():], True)
    return Line(proc, pid, None, None, None, None, body)


@dataclass(frozen=True, slots=True)
class Access:
    """An HTTP access line: the client, method, path and status."""

    client: str
    method: str
    path: str
    status: int


PROBES = frozenset({"/health", "/metrics", "/ping", "/load", "/version", "/v1/models"})
"""Paths a client or orchestrator polls: their access lines are no requests of a user's."""


def access(line: Line) -> Access | None:
    """The HTTP access a uvicorn line logs, else None."""
    if not line.uvicorn:
        return None
    m = _ACCESS.match(line.message)
    if m is None:
        return None
    return Access(m.group("client"), m.group("method"), m.group("path").split("?")[0],
                  int(m.group("status")))
