"""Read a llama-server log into its server runs: `parse_text(text)` gives a `LogFile`,
`parse_log` the one run of a log that holds one (files: adapters/llama/log/sources.py).

A file is whatever a user kept: the server's own output, or what a log shipper made of it,
its lines behind a prefix of any shape (adapters/llama/log/prefix.py), with CRLF line ends
and ANSI colours; several server processes one after another (a restart, a crash, a
container started again) or side by side (a router's children, told apart by the process id
their prefix names); a piece that starts or ends inside a request. Each process's lines go
to a run of their own (adapters/llama/log/run.py): a run begins where a server starts again
(a startup line once its predecessor served or shut down, or a line a process prints once,
seen twice). A file whose last line has no newline was cut while being written: that line
is dropped and reported; a gzip file whose stream ends early is read as far as it goes.
Text with no llama-server line at all is refused in one line. The digest is of the text as
read (after gzip decompression).
"""

import io
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from adapters.llama.errors import LlamaError
from adapters.llama.log.run import TAG, LineKind, LogReading, RunEnd, RunReader
from adapters.logs.compressed import GzipCut
from adapters.logs.prefix import Prefixes, clean, learn_prefixes, prefix_pid, prefix_time
from adapters.logs.reading import LogKind, read_stream

__all__ = ["LogFile", "LogFormatError", "LogReader", "LogReading", "parse_log", "parse_text",
           "read_lines"]


class LogFormatError(LlamaError):
    """The input is not a llama-server log (or cannot be read as text)."""


@dataclass
class LogFile:
    """A log file read into its server runs, in the order each began. `lines` counts the
    file's physical lines; `prefixes` an example of each outer prefix its lines carry."""

    name: str
    runs: list[LogReading]
    lines: int
    sha256: str
    partial_line: int | None = None
    gzip_cut: GzipCut | None = None
    prefixes: list[str] = field(default_factory=list)

    @property
    def parsed(self) -> int:
        """Lines that became a record or a fact, over every run."""
        return sum(r.parsed for r in self.runs)

    @property
    def skipped(self) -> int:
        """Known lines the ledger does not use, over every run."""
        return sum(r.skipped for r in self.runs)

    @property
    def unknown(self) -> int:
        """Lines no reader knows, over every run."""
        return sum(r.unknown for r in self.runs)

    def unknown_shapes(self, n: int = 10) -> list[tuple[str, int]]:
        """The `n` most common shapes of unknown lines, with their counts."""
        total: Counter[str] = Counter()
        for r in self.runs:
            total.update(r.unknown_shapes)
        return total.most_common(n)

    def only(self) -> LogReading:
        """The file's one server run; a file with several is refused, naming them."""
        if len(self.runs) == 1:
            return self.runs[0]
        spans = ", ".join(f"lines {r.first_line}-{r.last_line}" for r in self.runs)
        raise LogFormatError(f"{self.name} holds {len(self.runs)} server runs ({spans}); "
                             "read it with `specledger import`, which records each run")


class LogReader:
    """A log's lines in, its runs out: one `feed` per physical line, in order (`watch`
    feeds a live file this way); `finish` once the file ends."""

    def __init__(self, prefixes: Prefixes | None = None) -> None:
        self.prefixes = prefixes if prefixes is not None else Prefixes(TAG)
        self.runs: list[RunReader] = []
        self.ended: dict[int, RunEnd] = {}
        self._current: dict[int | None, RunReader] = {}

    def feed(self, number: int, raw: str) -> LineKind:
        """Read physical line `number`; how it was counted."""
        line = clean(raw)
        prefix, body = self.prefixes.split(line)
        kind, run = self._feed(number, prefix, body)
        if kind is LineKind.UNKNOWN and self.prefixes.learn_line(line):
            prefix, body = self.prefixes.split(line)
            kind, run = self._feed(number, prefix, body)
        if kind is LineKind.UNKNOWN:
            run.count_unknown(number, body)
        return kind

    def _feed(self, number: int, prefix: str, body: str) -> tuple[LineKind, RunReader]:
        """Feed a line to its process's run (the prefix's pid), or to a new run where the
        line starts a server again."""
        pid = prefix_pid(prefix) if prefix else None
        wall = prefix_time(prefix) if prefix else None
        run = self._current.get(pid)
        if run is not None:
            kind = run.feed(number, body, wall)
            if kind is not LineKind.NEW_RUN:
                return kind, run
            self.ended[run.out.index] = RunEnd.SHUTDOWN if run.shut_down else RunEnd.DIED
        run = self._new_run(number, pid)
        return run.feed(number, body, wall), run

    def _new_run(self, number: int, pid: int | None) -> RunReader:
        run = RunReader(len(self.runs), number, pid)
        self.runs.append(run)
        self._current[pid] = run
        return run

    def skip(self, number: int) -> None:
        """Count line `number` as skipped in the latest run (a line cut mid-write)."""
        run = self.runs[-1] if self.runs else self._new_run(number, None)
        run.out.skipped += 1

    @property
    def llama_lines(self) -> int:
        """Lines with the shape of llama-server's own, over every run."""
        return sum(r.llama_lines for r in self.runs)

    def finish(self) -> list[LogReading]:
        """The runs, each with how it ends: replaced by a later start (shutdown or died),
        else shut down, died on a fatal line, or running when the file ends."""
        out = []
        for run in self.runs:
            ending = self.ended.get(run.out.index)
            if ending is None:
                fatal = run.out.server_log.counts.get("crash", 0) > 0
                ending = (RunEnd.SHUTDOWN if run.shut_down else
                          RunEnd.DIED if fatal else RunEnd.LOG_ENDS)
            out.append(run.finish(ending))
        router = next((r for r in out if r.server.router and r.pid is None), None)
        for r in out:
            if router is not None and r.pid is not None and r.server.build is None:
                r.server.build = router.server.build  # a child runs its router's binary
        return out


LLAMA_LOG = LogKind("a llama-server log", "the text file the server's stdout/stderr went to",
                   "has the shape of a server, slot or model-loader line", LogFormatError)


def read_lines(lines: Iterable[bytes], name: str = "input") -> LogFile:
    """Read a log from its physical lines as bytes, each with its newline but a last one
    cut mid-write (dropped and reported); `name` is what errors call it. The lines are read
    as they come, so a file of any size is never held whole."""
    reader, read = read_stream(
        lines, name, LLAMA_LOG,
        lambda head: LogReader(learn_prefixes(TAG, [clean(line) for line in head])),
        lambda r: r.llama_lines)
    runs = reader.finish()
    for run in runs:
        run.lines, run.sha256, run.partial_line = run.run_lines, read.sha256, read.partial_line
    return LogFile(name, runs, read.lines, read.sha256, read.partial_line,
                   prefixes=reader.prefixes.shown())


def parse_text(text: str, name: str = "input") -> LogFile:
    """Read a whole log held in `text` (`name` is what errors call it)."""
    return read_lines(io.BytesIO(text.encode("utf-8", "surrogateescape")), name)


def parse_log(text: str, name: str = "input") -> LogReading:
    """The one server run of a log held in `text` (several are refused)."""
    return parse_text(text, name).only()
