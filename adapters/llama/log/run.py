"""One llama-server process's lines, read in order into records and facts: `RunReader`,
one method per kind of line. `adapters/llama/log/reader.py` cuts a file into runs and feeds
each line to its run's reader, its outer prefix (a shipper's timestamp, a process id)
already taken off.

A line may begin with llama's own logger prefix (`M.ss.mmm.uuu L `, the time since the
server started and the level letter; either may be off). A token whose text holds a newline
continues on the next physical line(s), as does a quoted chat template; a task's sampler
parameters follow their line as tab-indented lines, read into it; before 0.3.24 (and in
forks of that age) print_timing is one slot message of several lines, its first empty.
Every line is counted once: parsed (it became a record or a fact), skipped (a known line
the ledger does not use) or unknown (no shape this reader knows: a format it should learn),
and the shapes of unknown lines are counted, so a reader that falls behind a new build says
where.
"""

import re
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from enum import StrEnum

from adapters.llama.log.facts import ServerInfo, server_fact
from adapters.llama.log.patterns import (
    ComputeMark,
    compute_mark,
    is_slot_noise,
    opens_piece,
    sampler_params,
    slot_record,
    spec_record,
)
from adapters.llama.log.records import Compute, Record, RecordKind, SamplerParams, Server
from adapters.llama.log.server_lines import (
    ServerEvent,
    ServerEventKind,
    ServerLog,
    crash_line,
    server_line,
)
from adapters.llama.log.structured import (
    cache_prefix,
    fields_alone,
    structured_build,
    structured_fact,
    structured_http,
    structured_line,
    structured_record,
)
from adapters.logs.compressed import GzipCut
from adapters.logs.counting import LineKind
from adapters.logs.shapes import line_shape

TAG = re.compile(
    r"\d+\.\d{2}\.\d{3}\.\d{3} [DIWE] "                  # llama's own --log-prefix time
    r"|(?:slot|srv|que|res|spec|cmn)\s+[\w~]+: "          # slot / server / queue lines
    r"|(?:llama|ggml|gguf|common|clip|mtmd|load|print_info|system_info|build|main|sched"
    r"|graph|init_batch|decode|~llama)\w*: "              # loaders and the server's main
    r"|(?:INFO|WARN|ERR|VERB|DEBUG) \[\s*\w+\] ")         # ik_llama.cpp
"""What a llama-server line body starts with (adapters/logs/prefix.py learns what stands
before it)."""
_OWN_PREFIX = re.compile(r"^(?:(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) )?(?:([DIWE]) )?")
_SLOT = re.compile(r"^slot\s+[^:|]+:\s+id\s+(\d+)\s+\|\s+task\s+(-?\d+)\s+\|\s?(.*)$")
# A speculative line: `spec <func>: ` (0.3.36), else `<func>: ` or bare (older builds' LOG_DBG).
_SPEC = re.compile(r"^(?:spec\s+[^:]+:\s|[\w:~]+: )?(.*)$")
# A line of llama.cpp's logger: a `srv`/`que`/... tag and function, or a function name and
# a colon (LOG_INF("%s: ...", __func__) and its like throughout llama.cpp and ggml).
_TAGGED = re.compile(r"^(?:(?:srv|que|res|spec|cmn)\s+[\w~()]+:|[~\w.-]+(?: \w+)?:(?:\s|$))")
# Lines of known multi-line messages that carry no tag of their own, and the tails of known
# lines split where two writers' output interleaved (a sampler chain, a prompt-cache note).
_UNTAGGED = re.compile(
    r"^\s*(?:total time =|graphs reused =|Device \d+:|Running without SSL|Web UI is disabled"
    r"|no remote preset found|prompt eval time =|eval time =|draft acceptance|statistics \S+:"
    r"|=+ Cache:|- |looking for better prompt|> [\w?-]+ -> |--- .+ ---$"
    # ik_llama.cpp's: the memory it fits the model into as it loads (a table of layer
    # sizes between dashed rules), the tensors it leaves out, the second lines of its
    # startup notes, and its prompt cache (--cache-ram) saving and loading.
    r"|=+ ?(?:HAVE_\w+ is defined|loading DRAFT model=+)$|-{8,}(?: Layer sizes:)?$"
    r"|Layer\s+\d+:|Total\s+:|Free memory \d+ MiB on device|Memory (?:required|available)"
    r"|model has unused tensor|use `--|=+ Prompt cache:|updating prompt cache"
    r"|prompt cache (?:is enabled|save took|load took))")
_QUOTE_OPENERS = ("example_format: '",)  # a message whose quoted text spans lines
# ik_llama.cpp shows where a prompt parts from its slot's tokens: the text of each around
# that point (`cache : …`, `prompt: …`; 30 tokens, 50 after a context shift), its newlines
# going on to the lines after, up to the next line that is read into a record.
_EXCERPT = re.compile(r"^(?:cache |prompt): ")
_MAX_EXCERPT = 50  # lines an excerpt may go on for: a token's text holds one newline at most
_MAX_CONTINUATION = 8
_MAX_QUOTE = 256
_TIMING_KINDS = (RecordKind.TIMING, RecordKind.DRAFT_TOTALS)
_LAST_LINES = 12
UNKNOWN_EXAMPLES = 5
# What starts a server process, and what a process prints once: a new run begins at one of
# them once the current run is serving or has shut down, or when a once-line repeats.
# From 0.3.36 on these come behind a `cmn  <function>: ` or `srv  <function>: ` tag.
_STARTUP = re.compile(
    r"^(?:(?:cmn|srv)\s+[\w~]+: )?(?:ggml_cuda_init:|ggml_vulkan:|load_backend:|build_info:"
    r"|build: \d+ \(|system_info:|system info:|common_params_print_info: build"
    r"|(?:srv\s+)?main: n_parallel|version: \d+|warn: LLAMA_ARG|main: build|main: loading model"
    r"|(?:srv\s+)?llama_server: initializing|INFO \[\s*main\] build info)")
_ONCE = re.compile(
    r"^(?:(?:cmn|srv)\s+[\w~]+: )?(ggml_cuda_init:|build_info:|build: |system_info:|version: "
    r"|common_params_print_info: build|(?:srv\s+)?llama_server: initializing"
    r"|INFO \[\s*main\] build info)")
# The prompt cache (--cache-ram) puts a saved prompt into the slot the next task takes.
_PROMPT_LOADED = re.compile(r"^srv\s+load:\s+- found better prompt")
_LOOP_TAGS = ("que ", "res ", "srv ")  # the server loop's tags, by the line's first 4 characters
_STRUCTURED_FIRST = frozenset("IWEVD{= ")  # how a structured logger's line can begin
_LISTENING = re.compile(r"^(?:srv\s+)?main: (?:router )?server is listening|starting the main loop")


class RunEnd(StrEnum):
    """How a server run ends in the file: its shutdown lines (`shutdown`), without them and
    followed by another run or by a fatal line (`died`), or the file ends while it serves
    (`log_ends`: still running when the log was taken, or the log was cut)."""

    SHUTDOWN = "shutdown"
    DIED = "died"
    LOG_ENDS = "log_ends"


@dataclass
class LogReading:
    """One server run: its records in line order, its facts, how its lines were counted,
    and where it lies in the file (`first_line`..`last_line`, `pid` where the prefix names
    the process, `wall_start` the wall-clock time of its first line where a prefix gives
    one). `server_log` holds its server-level events (HTTP answers, errors, crash lines);
    `ending` how it ends and `last_lines` its last lines (a crash quotes them). The file's
    own facts (`lines`, `partial_line`, `gzip_cut`, `sha256`) are those of the file it came
    from: a one-run file's reading is the file's."""

    records: list[Record]
    server: ServerInfo
    lines: int = 0
    parsed: int = 0
    skipped: int = 0
    unknown: int = 0
    unknown_examples: list[str] = field(default_factory=list)
    unknown_shapes: Counter[str] = field(default_factory=Counter)
    partial_line: int | None = None
    gzip_cut: GzipCut | None = None
    sha256: str = ""
    index: int = 0
    first_line: int = 1
    last_line: int = 0
    pid: int | None = None
    wall_start: float | None = None
    ending: RunEnd = RunEnd.LOG_ENDS
    last_lines: list[str] = field(default_factory=list)
    server_log: ServerLog = field(default_factory=ServerLog)

    @property
    def run_lines(self) -> int:
        """The lines of this run."""
        return self.parsed + self.skipped + self.unknown


def own_time(m: re.Match[str]) -> float | None:
    """The seconds a matched `M.ss.mmm.uuu` logger prefix gives (None: the line has none)."""
    minutes, sec, ms, us = m.group(1, 2, 3, 4)
    if minutes is None:
        return None
    return int(minutes) * 60 + int(sec) + int(ms) / 1e3 + int(us) / 1e6


def line_time(line: str) -> float | None:
    """The seconds a line's `M.ss.mmm.uuu` prefix gives (None: the line has none)."""
    m = _OWN_PREFIX.match(line)
    return None if m is None else own_time(m)


class RunReader:
    """One server run, line by line. Each `feed` counts its line and says how."""

    def __init__(self, index: int, first_line: int, pid: int | None) -> None:
        self.out = LogReading(records=[], server=ServerInfo(), index=index,
                              first_line=first_line, last_line=first_line - 1, pid=pid)
        self.serving = False
        self.shut_down = False
        self._once: set[str] = set()
        self._llama_lines = 0
        self._own_prefixed = False  # the run's lines carry the logger's time prefix
        self._continuation = 0
        self._quote = 0
        self._excerpt = 0  # lines an ik excerpt may still go on for
        self._params: SamplerParams | None = None  # a `sampler params:` line, values to come
        self._params_lines: list[str] = []
        self._timing_ctx: dict[str, int | float | None] | None = None
        self._compute: tuple[float | None, bool] | None = None  # an open bracket: start, chained
        self._call_line = 0  # the last decode call's line
        self._wall0: float | None = None
        self._last: deque[str] = deque(maxlen=_LAST_LINES)

    def _starts_anew(self, text: str) -> bool:
        """Whether a line (its prefixes off) begins another process's run rather than
        continuing this one."""
        if _STARTUP.match(text) is None:
            return False
        once = _ONCE.match(text)
        return self.serving or self.shut_down or (once is not None
                                                  and once.group(1) in self._once)

    def feed(self, number: int, body: str, wall: float | None) -> LineKind:
        """Read one line (its outer prefix off; `wall` the prefix's wall-clock time); a line
        that starts another server process is not read (NEW_RUN)."""
        if body[:1] == ".":  # a loader's progress dots, the next message glued on
            body = body.lstrip(".")
        own = _OWN_PREFIX.match(body)
        assert own is not None  # every part of it is optional
        end = own.end()
        text = body[end:] if end else body
        if self._starts_anew(text):
            return LineKind.NEW_RUN
        self.out.last_line = number
        if wall is not None and self._wall0 is None:
            self._wall0 = self.out.wall_start = wall
        t = None
        if end and own.group(1) is not None:
            self._own_prefixed = True
            t = own_time(own)
        elif wall is not None and self._wall0 is not None:
            t = round(wall - self._wall0, 6)
        kind = self._classify(number, text, end > 0, t)
        if kind is LineKind.PARSED:
            self._excerpt = 0
        if kind is not LineKind.UNKNOWN:
            self._count(kind)
            if text:
                self._last.append(text)
        return kind

    def count_unknown(self, number: int, text: str) -> None:
        """Count a line no reader knows (`reader.py` first tries it with a new prefix)."""
        self._count(LineKind.UNKNOWN)
        self._last.append(text)
        self.out.unknown_shapes[line_shape(text)] += 1
        if len(self.out.unknown_examples) < UNKNOWN_EXAMPLES:
            self.out.unknown_examples.append(f"{number}: {text[:120]}")

    def _count(self, kind: LineKind) -> None:
        if kind is LineKind.PARSED:
            self.out.parsed += 1
        elif kind is LineKind.SKIPPED:
            self.out.skipped += 1
        else:
            self.out.unknown += 1

    def _classify(self, number: int, text: str, prefixed: bool, t: float | None) -> LineKind:
        if self._params is not None:
            kind = self._params_line(text, prefixed)
            if kind is not None:
                return kind
        if self._quote or self._continuation:
            kind = self._continuation_line(text, prefixed)
            if kind is not None:
                return kind
        head = text[:4]
        if head == "slot":
            slot_m = _SLOT.match(text)
            if slot_m is not None:
                return self._slot_line(number, t, slot_m)
        elif head in _LOOP_TAGS and self.serving:
            # The server loop's lines while it serves: compute brackets, else noise, but for
            # the server-level lines (HTTP answers, errors, a prompt-cache load).
            kind = self._compute_line(number, text, prefixed, t)
            if kind is not None:
                return kind
            if head == "srv ":
                return self._server_line(number, text, prefixed, t) or LineKind.SKIPPED
            return LineKind.SKIPPED
        kind = (self._timing_line(number, text, prefixed, t)
                if self._timing_ctx is not None and not prefixed else None)
        if kind is None and head in _LOOP_TAGS:
            kind = self._compute_line(number, text, prefixed, t)
        if kind is None:
            kind = self._spec_line(number, text, prefixed, t)
        if kind is None and text[:1] in _STRUCTURED_FIRST:
            kind = self._structured_line(number, text, prefixed, t)
        if kind is None:
            kind = self._server_line(number, text, prefixed, t)
        if kind is not None:
            return kind
        if not text.strip() or (self._own_prefixed and not prefixed):
            # With the logger's prefix on, an unprefixed line continues the message before it.
            return LineKind.SKIPPED
        if self._excerpt:
            self._excerpt -= 1
            return LineKind.SKIPPED
        return LineKind.UNKNOWN

    def _params_line(self, text: str, prefixed: bool) -> LineKind | None:
        """A tab-indented line of a `sampler params:` block, or the line after the block."""
        if self._params is None:
            return None
        if not prefixed and text.startswith("\t"):
            self._params_lines.append(text)
            return LineKind.PARSED
        self._flush_params()
        return None

    def _flush_params(self) -> None:
        if self._params is not None:
            self.out.records.append(replace(self._params,
                                            params=sampler_params(self._params_lines)))
            self._params = None

    def _continuation_line(self, text: str, prefixed: bool) -> LineKind | None:
        """A physical line that continues the previous one: a token's or candidate's
        piece holding a newline, or a quoted multi-line message."""
        if self._quote and not prefixed:
            self._quote = 0 if text.endswith("'") else self._quote - 1
            return LineKind.SKIPPED
        self._quote = 0
        if self._continuation and not prefixed:
            self._continuation = 0 if text.endswith("'") else self._continuation - 1
            return LineKind.SKIPPED
        self._continuation = 0
        return None

    def _slot_line(self, number: int, t: float | None, m: re.Match[str]) -> LineKind:
        self._llama_lines += 1
        slot, task, message = m.group(1, 2, 3)
        ctx = {"line": number, "t": t, "slot": int(slot), "task": int(task)}
        if ctx["task"] >= 0:
            self.serving = True  # a slot line of a task; `task -1` ones come at load too
        self._timing_ctx = ctx if not message.strip() else None
        record = slot_record(message, ctx)
        if isinstance(record, SamplerParams):
            self._params, self._params_lines = record, []
            return LineKind.PARSED
        if record is not None:
            self.out.records.append(record)
            self._continuation = _MAX_CONTINUATION if opens_piece(message) else 0
            return LineKind.PARSED
        return LineKind.SKIPPED if is_slot_noise(message) else LineKind.UNKNOWN

    def _timing_line(self, number: int, text: str, prefixed: bool,
                     t: float | None) -> LineKind | None:
        """A line of a multi-line print_timing message (its slot prefix on its first)."""
        if self._timing_ctx is None or prefixed:
            return None
        record = slot_record(text, {**self._timing_ctx, "line": number})
        if record is None or record.kind not in _TIMING_KINDS:
            return None
        self.out.records.append(record)
        return LineKind.PARSED

    def _compute_line(self, number: int, text: str, prefixed: bool,
                      t: float | None) -> LineKind | None:
        """The server loop's lines around a decode call (-v of 0.3.36)."""
        mark = compute_mark(text)
        if mark is ComputeMark.CALL:
            self._call_line = number  # a forward of its own follows: its bracket is not chained
            return LineKind.SKIPPED
        if mark is None:
            return None
        self._llama_lines += 1
        if mark is ComputeMark.BEGIN:
            records = self.out.records
            last = records[-1] if records else None
            self._compute = (t, last is not None and last.kind is RecordKind.COMPUTE
                             and last.line > self._call_line)
        elif self._compute is not None:
            self.out.records.append(Compute(kind=RecordKind.COMPUTE, line=number, t=t,
                                            slot=None, task=None, t_begin=self._compute[0],
                                            chained=self._compute[1]))
            self._compute = None
        return LineKind.PARSED

    def _spec_line(self, number: int, text: str, prefixed: bool,
                   t: float | None) -> LineKind | None:
        spec_m = _SPEC.match(text)
        assert spec_m is not None  # every part of it is optional
        record = spec_record(spec_m.group(1), number, t)
        if record is None:
            return None
        self.out.records.append(record)
        self._continuation = _MAX_CONTINUATION if opens_piece(spec_m.group(1)) else 0
        self._llama_lines += 1
        return LineKind.PARSED

    def _structured_line(self, number: int, text: str, prefixed: bool,
                         t: float | None) -> LineKind | None:
        """A line of the structured logger (ik_llama.cpp), or its prompt-cache line."""
        s = structured_line(text)
        if s is None:
            if fields_alone(text):
                return LineKind.SKIPPED
            cache = cache_prefix(text, number, t)
            if cache is None:
                return None
            self.out.records.append(cache)
            return LineKind.PARSED
        self._llama_lines += 1
        self.out.server.structured_log = True
        record = structured_record(s, number, t)
        if record is not None:
            self.serving = True
            self.out.records.append(record)
            return LineKind.PARSED
        build = structured_build(s)
        if build is not None:
            once = _ONCE.match(text)
            if once is not None:
                self._once.add(once.group(1))
            self.out.server.build = self.out.server.build or build
            return LineKind.PARSED
        fact = structured_fact(s)
        if fact is not None:
            name, value = fact
            if not getattr(self.out.server, name):  # the first one counts (a line a slot)
                setattr(self.out.server, name, value)
            return LineKind.PARSED
        http = structured_http(s)
        if http is not None:
            self._server_event(ServerEvent(ServerEventKind.HTTP, number, t, status=http[1],
                                           text=http[0]))
            return LineKind.PARSED
        if s.message == "HTTP server listening":
            self.serving = True
        event = server_line(s.message, number, t)
        if event is not None:
            self._server_event(event)
            self.shut_down = self.shut_down or event.shutdown
            return LineKind.PARSED
        return LineKind.SKIPPED

    def _server_event(self, event: ServerEvent) -> None:
        """Keep a server-level event in the run's log, and as a record where it bears on
        the requests (every one but a successful answer)."""
        self.out.server_log.add(event)
        if not (event.kind is ServerEventKind.HTTP and (event.status or 0) < 400):
            self.out.records.append(Server(kind=RecordKind.SERVER, line=event.line,
                                           t=event.t, slot=None, task=event.task,
                                           what=event.kind, status=event.status,
                                           text=event.text))

    def _server_line(self, number: int, text: str, prefixed: bool,
                     t: float | None) -> LineKind | None:
        """A server-level line: a fact about the server, an HTTP answer, an error, a crash,
        the run's start, serving or shutdown, or a known line of llama.cpp's logger."""
        if not self.serving:  # what a process prints as it starts, once
            once = _ONCE.match(text)
            if once is not None:
                self._once.add(once.group(1))
            if _LISTENING.search(text):
                self.serving = True
        if self.out.server.structured_log and _EXCERPT.match(text):
            self._excerpt = _MAX_EXCERPT
            return LineKind.SKIPPED
        tagged = _TAGGED.match(text) is not None
        self._llama_lines += bool(prefixed or TAG.match(text))
        if any(o in text for o in _QUOTE_OPENERS) and not text.endswith("'"):
            self._quote = _MAX_QUOTE
        event = server_line(text, number, t)
        if event is not None:
            self._server_event(event)
            self.shut_down = self.shut_down or event.shutdown
            return LineKind.PARSED
        if server_fact(text, self.out.server, self.serving):
            return LineKind.PARSED
        if _PROMPT_LOADED.match(text):
            self.out.records.append(Record(kind=RecordKind.PROMPT_LOADED, line=number, t=t,
                                           slot=None, task=None))
            return LineKind.PARSED
        crash = crash_line(text, number, t)
        if crash is not None:
            self._server_event(crash)
            return LineKind.PARSED
        if tagged or prefixed or _UNTAGGED.match(text):
            return LineKind.SKIPPED
        return None

    @property
    def llama_lines(self) -> int:
        """Lines with the shape of llama-server's own (a slot, server or loader line)."""
        return self._llama_lines

    def finish(self, ending: RunEnd) -> LogReading:
        """The run, once its last line was fed."""
        self._flush_params()
        self.out.ending = ending
        self.out.last_lines = list(self._last)
        return self.out
