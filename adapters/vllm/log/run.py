"""One vLLM server run, a line at a time, into an interval run (adapters/logs/intervals/run.py):
its start-up facts (version, model, architecture, speculative method and k, prefix caching),
its stats lines as intervals (a SpecDecoding line joins the Engine line printed with it),
its HTTP access lines as requests (with the id request logging gave the request, where it
is on), and its failures: the engine core's fatal error or
failed start, a worker's death, a traceback of the engine core whose header the log lacks;
each with the lines before it, the requests the engine's input dump names, and the requests
running at the last interval. Its shutdown lines end it; the shutdown's own errors (the API
server's output handler meeting the stopped engine) are no failure.
"""

import re
from collections import deque

from adapters.logs.counting import LineKind
from adapters.logs.intervals.run import (
    Failure,
    FailureKind,
    IntervalLine,
    RequestLine,
    RunEnding,
    ServerRun,
)
from adapters.logs.shapes import line_shape
from adapters.vllm.log.lines import PROBES, Line, access
from adapters.vllm.log.stats import join_spec, stats_interval

ENGINE = "vllm"
_LAST = 12  # lines kept before a failure, and at a run's end

_VERSION = re.compile(r"(?:\bversion |vLLM API server version |LLM engine \(v)"
                      r"(?P<v>\d+\.\d+[\w.+-]*)")
_MODEL = re.compile(r"^(?:\S+\s+)*model\s+(?P<m>\S+)\s*$|with config: model='(?P<c>[^']+)'")
_ARCH = re.compile(r"Resolved architecture: (?P<a>\w+)")
_SPEC = re.compile(r"SpeculativeConfig\(method='(?P<m>[\w-]+)'.*?num_spec_tokens=(?P<k>\d+)"
                   r"|'speculative_config': \{[^}]*?'method': '(?P<m2>[\w-]+)'"
                   r"(?:[^}]*?'num_speculative_tokens': (?P<k2>\d+))?")
_CACHING = re.compile(r"enable_prefix_caching['\"]?[=:] ?(?P<on>True|False)")
_HYBRID_ARCH = re.compile(r"Qwen3_5|Qwen3Next|Mamba|Jamba|NemotronH|GraniteMoeHybrid|FalconH|"
                          r"Lfm2|Zamba|Bamba|Plamo2|MiniMaxText01|Kimi.?Linear")
_HYBRID_LINE = re.compile(r"Mamba cache mode|gdn_linear_attn|mamba_ssm|GDN ")
_RECEIVED = re.compile(r"^Received request (?P<id>\S+?):")
_REQ_IDS = re.compile(r"req_ids?=\[?'?(?P<id>[\w.:-]{6,})")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)"
                        r"(?::.*)?$")
_FAILURES = (
    (re.compile(r"EngineCore encountered a fatal error"), FailureKind.ENGINE_DIED),
    (re.compile(r"EngineCore failed to start|Engine core initialization failed"),
     FailureKind.STARTUP_FAILED),
    (re.compile(r"Worker proc \S+ died unexpectedly|Worker \S+ died"),
     FailureKind.WORKER_DIED),
)
_STARTS = re.compile(r"non-default args:|vLLM API server version|^\s*▄▄ ▄█ █ .*version ")
_SHUTDOWN = re.compile(r"^\[shutdown\]|^Shutting down$|^Application shutdown complete"
                       r"|^Finished server process")


class RunReader:
    """One run's lines in (`feed`), its `ServerRun` out (`finish`)."""

    def __init__(self, index: int, first_line: int, pid: int | None) -> None:
        self.run = ServerRun(ENGINE, index, first_line, pid=pid)
        self.recent: deque[str] = deque(maxlen=_LAST)
        self.served = False
        self.shutting_down = False
        self.now: float | None = None
        self.dumped: list[str] = []
        self.received: deque[str] = deque()  # ids request logging named, not yet answered
        self._open: dict[str, Failure] = {}  # process -> its failure still being printed

    def feed(self, number: int, line: Line, body: str) -> LineKind:
        """Read physical line `number` (split into `line`; `body` as printed)."""
        if line.proc == "APIServer" and self.run.pid is not None and line.pid != self.run.pid:
            return LineKind.NEW_RUN
        if _STARTS.search(line.message) and (self.served or self.shutting_down):
            return LineKind.NEW_RUN
        if line.proc == "APIServer" and self.run.pid is None:
            self.run.pid = line.pid
        self.run.last_line = number
        self.recent.append(body)
        if line.at is not None:
            self.now = line.at
        kind = self._read(number, line) if line.tagged else LineKind.UNKNOWN
        if kind is LineKind.UNKNOWN:
            kind = self._traceback(line)
        if kind is LineKind.PARSED:
            self.run.parsed += 1
        elif kind is LineKind.SKIPPED:
            self.run.skipped += 1
        else:
            self.run.unknown += 1
            self.run.unknown_shapes[line_shape(line.message)] += 1
        return kind

    def _read(self, number: int, line: Line) -> LineKind:
        msg = line.message
        iv = stats_interval(msg, number, line.clock, line.at)
        if iv is not None:
            self._interval(iv)
            return LineKind.PARSED
        hit = access(line)
        if hit is not None:
            if hit.path not in PROBES or hit.status >= 400:
                self.served = True
                rid = self.received.popleft() if self.received and hit.method == "POST" \
                    else None
                self.run.requests.append(RequestLine(number, None, self.now, hit.status,
                                                     hit.method, hit.path, rid))
            return LineKind.PARSED
        m = _RECEIVED.match(msg)
        if m is not None:  # request logging (--enable-log-requests): its access line follows
            self.received.append(m.group("id"))
            return LineKind.PARSED
        if _SHUTDOWN.search(msg):
            self.shutting_down = True
            return LineKind.PARSED
        if self._failure(number, line) or self._fact(msg):
            return LineKind.PARSED
        if "Dumping input data" in msg or "Dumping scheduler" in msg:
            self.dumped.extend(m.group("id") for m in _REQ_IDS.finditer(msg))
            return LineKind.PARSED
        return self._traceback(line) if line.level == "ERROR" else LineKind.SKIPPED

    def _interval(self, iv: IntervalLine) -> None:
        ivs = self.run.intervals
        if iv.kind.value == "spec" and ivs and join_spec(ivs[-1], iv):
            return
        ivs.append(iv)

    def _fact(self, msg: str) -> bool:
        r = self.run
        found = False
        for pattern, name in ((_VERSION, "version"), (_ARCH, "architecture")):
            m = pattern.search(msg)
            if m is not None and getattr(r, name) is None:
                setattr(r, name, next(g for g in m.groups() if g))
                found = True
        m = _MODEL.search(msg)
        if m is not None and r.model is None:
            r.model, found = m.group("m") or m.group("c"), True
        m = _SPEC.search(msg)
        if m is not None and (r.method is None or m.group("m")):
            r.method = m.group("m") or m.group("m2")
            k = m.group("k") or m.group("k2")
            r.num_spec_tokens = int(k) if k else r.num_spec_tokens
            found = True
        m = _CACHING.search(msg)
        if m is not None:
            r.prefix_caching, found = m.group("on") == "True", True
        if r.architecture is not None and r.hybrid is None:
            r.hybrid = bool(_HYBRID_ARCH.search(r.architecture)) or None
        if _HYBRID_LINE.search(msg):
            r.hybrid = True
        return found

    def _failure(self, number: int, line: Line) -> bool:
        if self.shutting_down:
            return False
        for pattern, kind in _FAILURES:
            m = pattern.search(line.message)
            if m is None:
                continue
            open_one = self._open.get(line.proc or "")
            if open_one is None or open_one.kind is not kind:
                self._add_failure(kind, number, line, m.group())
            elif _EXCEPTION.match(line.message.strip()):
                open_one.message = line.message.strip()
            return True
        return False

    def _add_failure(self, kind: FailureKind, number: int, line: Line, message: str) -> None:
        last = self.run.intervals[-1] if self.run.intervals else None
        f = Failure(kind, number, line.clock, message, list(self.recent)[:-1],
                    list(dict.fromkeys(self.dumped)), last.running if last else None)
        self.run.failures.append(f)
        self._open[line.proc or ""] = f

    def _traceback(self, line: Line) -> LineKind:
        """A line of a traceback: its exception line names the process's open failure; a
        traceback of the engine core with no failure open opens one (its header cut)."""
        text = line.message.strip()
        proc = line.proc or ""
        if not proc or self.shutting_down:
            return LineKind.UNKNOWN if not line.tagged else LineKind.SKIPPED
        failure = self._open.get(proc)
        if failure is None and proc.startswith("EngineCore") and text.startswith("File \""):
            self._add_failure(FailureKind.ENGINE_DIED, self.run.last_line, line,
                              "a traceback of the engine core (its first lines are not in "
                              "the log)")
            failure = self._open[proc]
        if failure is not None and _EXCEPTION.match(text):
            failure.message = text
        return LineKind.SKIPPED if failure is not None or line.tagged else LineKind.UNKNOWN

    def finish(self, ending: RunEnding | None = None) -> ServerRun:
        """The run, ended as the caller says (a later start), else by its own lines."""
        r = self.run
        r.last_lines = list(self.recent)
        if ending is None:
            ending = (RunEnding.SHUTDOWN if self.shutting_down else
                      RunEnding.DIED if r.failures else RunEnding.LOG_ENDS)
        r.ending = ending
        return r
