"""One SGLang server process's lines, read in order into records: `RunReader`, one method
per kind of message (adapters/sglang/log/patterns.py). `reader.py` cuts a file into runs
and feeds each line to its run, the outer prefix already taken off.

Every line is counted once: parsed (it became a record or a setting), skipped (SGLang's
logger wrote it, or it is known noise, and it carries nothing read) or unknown (neither:
a print this reader does not know), and the shapes of unknown lines are counted. A line
after `… hit an exception:` without the logger's prefix belongs to that crash's traceback,
up to the exception line that ends it.
"""

import re
from collections import deque

from adapters.logs.counting import LineKind
from adapters.logs.shapes import line_shape
from adapters.sglang.log.args import read_args
from adapters.sglang.log.fields import read_batch
from adapters.sglang.log.patterns import (
    EXCEPTION_LINE,
    FINISH_FIELDS,
    KINDS,
    NOISE,
    OWN,
    SHUTDOWN_NOTE,
    TRACEBACK,
    WARNING,
    WARNING_TAIL,
    Kind,
)
from adapters.sglang.log.records import (
    BatchKind,
    Crash,
    FinishedRequest,
    HttpAnswer,
    LifeEvent,
    LifeKind,
    ReceivedRequest,
    RunEnd,
    SglangRun,
)

_LAST_LINES = 12
_LIFE = {Kind.READY: LifeKind.READY, Kind.SIGTERM: LifeKind.SIGTERM,
         Kind.SIGQUIT: LifeKind.SIGQUIT, Kind.CHILD_EXIT: LifeKind.CHILD_EXIT,
         Kind.KILL_TREE: LifeKind.KILL_TREE}
_INT_FIELDS = ("prompt_tokens", "completion_tokens", "cached_tokens", "spec_verify_ct")


class RunReader:
    """One server run, line by line. Each `feed` counts its line and says how."""

    def __init__(self, index: int, first_line: int) -> None:
        self.out = SglangRun(index, first_line, first_line - 1)
        self._crash: Crash | None = None  # a crash whose traceback is still being read
        self._warning = False  # the last line opened a Python warning
        self._last: deque[str] = deque(maxlen=_LAST_LINES)
        self._methods = {
            Kind.BATCH: self._batch, Kind.HTTP: self._http, Kind.FINISH: self._finish,
            Kind.RECEIVE: self._receive, Kind.SERVER_ARGS: self._server_args,
            Kind.CAPACITY: self._capacity, Kind.HYBRID: self._hybrid,
            Kind.EXCEPTION: self._exception, Kind.STARTED: self._started,
        }

    def starts_anew(self, body: str) -> bool:
        """Whether a line begins another server's run: its `server_args` line, once this
        run has printed its own or has served, shut down or crashed."""
        own = OWN.match(body)
        if own is None or not body[own.end():].startswith("server_args="):
            return False
        o = self.out
        return bool(o.server.args or o.batches or o.http or o.life or o.crashes)

    def feed(self, number: int, body: str) -> LineKind:
        """Read one line (its outer prefix off)."""
        self.out.last_line = number
        own = OWN.match(body)
        if own is None:
            kind = self._bare(body)
        else:
            self._crash = None
            self._warning = False
            kind = self._message(number, body[own.end():], own)
        self._count(kind)
        if kind is LineKind.UNKNOWN:
            self.out.unknown_shapes[line_shape(body)] += 1
        if body.strip():
            self._last.append(body.strip())
        return kind

    def _count(self, kind: LineKind) -> None:
        if kind is LineKind.PARSED:
            self.out.parsed += 1
        elif kind is LineKind.SKIPPED:
            self.out.skipped += 1
        else:
            self.out.unknown += 1

    def _message(self, number: int, text: str, own: re.Match[str]) -> LineKind:
        """A line the logger wrote: read it if its message is one of the kinds."""
        clock = own.group("time")
        rank = own.group("rank")
        hit = KINDS.first(text)
        if hit is None:
            return LineKind.SKIPPED
        m, kind = hit
        if kind in _LIFE:
            self.out.life.append(LifeEvent(_LIFE[kind], number, clock, text))
            return LineKind.PARSED
        return self._methods[kind](number, m, kind, clock, rank)

    def _bare(self, text: str) -> LineKind:
        """A line without the logger's prefix: a traceback's, noise, or unknown."""
        crash = self._crash
        if crash is not None:
            if text.strip() and not text[0].isspace() and EXCEPTION_LINE.match(text):
                crash.exception = text.strip()
                self._crash = None
            elif text.strip():
                crash.traceback.append(text.rstrip())
            return LineKind.PARSED
        if TRACEBACK.match(text):  # a traceback no logger line announced (a launch error)
            self._crash = Crash(self.out.last_line, None, None, "python",
                                last_lines=list(self._last))
            self.out.crashes.append(self._crash)
            return LineKind.PARSED
        if SHUTDOWN_NOTE.search(text):
            self.out.life.append(LifeEvent(LifeKind.EXITED, self.out.last_line, None,
                                           text.strip()))
            self._warning = True
            return LineKind.PARSED
        if self._warning and WARNING_TAIL.match(text):
            return LineKind.SKIPPED
        self._warning = WARNING.search(text) is not None
        return LineKind.SKIPPED if NOISE.match(text) else LineKind.UNKNOWN

    def _batch(self, number: int, m: re.Match[str], kind: Kind, clock: str | None,
               rank: str | None) -> LineKind:
        batch_kind = BatchKind(m.group("batch").lower())
        self.out.batches.append(read_batch(batch_kind, m.group("fields"), number, clock, rank))
        return LineKind.PARSED

    def _http(self, number: int, m: re.Match[str], kind: Kind, clock: str | None,
              rank: str | None) -> LineKind:
        self.out.http.append(HttpAnswer(number, clock, m.group("client"), m.group("method"),
                                        m.group("path"), int(m.group("status")),
                                        m.group("reason").strip()))
        return LineKind.PARSED

    def _finish(self, number: int, m: re.Match[str], kind: Kind, clock: str | None,
                rank: str | None) -> LineKind:
        rest = m.group("rest")
        got: dict[str, str | None] = {}
        for name, pattern in FINISH_FIELDS.items():
            f = pattern.search(rest)
            got[name] = None if f is None else next(v for v in f.groups() if v is not None)
        ints = {k: None if (v := got[k]) is None else int(v) for k in _INT_FIELDS}
        latency = got["e2e_latency"]
        self.out.finished.append(FinishedRequest(
            number, clock, got["rid"], ints["prompt_tokens"], ints["completion_tokens"],
            ints["cached_tokens"], ints["spec_verify_ct"], got["finish_reason"],
            None if latency is None else float(latency)))
        return LineKind.PARSED

    def _receive(self, number: int, m: re.Match[str], kind: Kind, clock: str | None,
                 rank: str | None) -> LineKind:
        self.out.received.append(ReceivedRequest(number, clock, m.group("rid")))
        return LineKind.PARSED

    def _server_args(self, number: int, m: re.Match[str], kind: Kind, clock: str | None,
                     rank: str | None) -> LineKind:
        self.out.server.take_args(read_args(m.group("args")))
        return LineKind.PARSED

    def _capacity(self, number: int, m: re.Match[str], kind: Kind, clock: str | None,
                  rank: str | None) -> LineKind:
        self.out.server.max_total_tokens = int(m.group("tokens"))
        return LineKind.PARSED

    def _hybrid(self, number: int, m: re.Match[str], kind: Kind, clock: str | None,
                rank: str | None) -> LineKind:
        hybrid = self.out.server.hybrid
        if m.group("arch"):
            self.out.server.architecture = m.group("arch")
        if m.group("swa") or m.group("tswa") == "True":
            hybrid.add("swa")
        if m.group("ssm") or m.group("tssm") == "True":
            hybrid.add("ssm")
        return LineKind.PARSED

    def _exception(self, number: int, m: re.Match[str], kind: Kind, clock: str | None,
                   rank: str | None) -> LineKind:
        self._crash = Crash(number, clock, rank, m.group("who"), last_lines=list(self._last))
        rest = m.group("message").strip()
        if rest and not TRACEBACK.match(rest):
            self._crash.exception = rest
        self.out.crashes.append(self._crash)
        return LineKind.PARSED

    def _started(self, number: int, m: re.Match[str], kind: Kind, clock: str | None,
                 rank: str | None) -> LineKind:
        self.out.pid = int(m.group("pid"))
        return LineKind.PARSED

    def finish(self, replaced: bool) -> SglangRun:
        """The run as read, with how it ends (`replaced`: another start follows it)."""
        out = self.out
        kinds = {e.kind for e in out.life}
        out.ending = (RunEnd.CRASHED if out.crashes else
                      RunEnd.SHUTDOWN if LifeKind.SIGTERM in kinds else
                      RunEnd.DIED if replaced or kinds & {LifeKind.SIGQUIT, LifeKind.EXITED}
                      else
                      RunEnd.LOG_ENDS)
        out.last_lines = list(self._last)
        return out
