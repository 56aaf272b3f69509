"""Read an SGLang server log into its server runs: `read_lines` gives a `SglangLog`,
`read_file` / `read_source` read what a user's disk holds (adapters/logs/sources.py: files,
folders, rotated sets, gzip read as far as it goes).

A file is whatever a user kept: the server's output, or a log shipper's, its lines behind a
prefix of any shape (learned per file, adapters/logs/prefix.py); several server starts one
after another (each begins at its `server_args=` line); a piece of a thread that starts or
ends anywhere. A last line without its newline was cut while being written: it is dropped
and reported. Text with no SGLang logger line at all is refused in one line.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from adapters.logs.compressed import GzipCut
from adapters.logs.prefix import Prefixes, clean, learn_prefixes
from adapters.logs.reading import LogKind, read_stream
from adapters.logs.reading import read_source as read_stream_source
from adapters.logs.sources import LogSource, SourceError, expand, shipped_log
from adapters.sglang.log.patterns import OWN, TAG, unglue
from adapters.sglang.log.records import SglangRun
from adapters.sglang.log.run import LineKind, RunReader
from fsm.errors import SpecledgerError

SHIPPED_DIR = Path(__file__).with_name("shipped")
"""Real SGLang logs users published that the package carries (SOURCE.md there says whose)."""


class SglangLogError(SpecledgerError):
    """The input is not an SGLang server log, or cannot be read."""


@dataclass
class SglangLog:
    """A log file read into its server runs, in order. `lines` counts its physical lines;
    `prefixes` an example of each outer prefix its lines carry."""

    name: str
    runs: list[SglangRun]
    lines: int
    sha256: str
    partial_line: int | None = None
    gzip_cut: GzipCut | None = None
    prefixes: list[str] = field(default_factory=list)


class LogReader:
    """A log's lines in, its runs out: one `feed` per physical line, in order; `finish`
    once the file ends."""

    def __init__(self, prefixes: Prefixes | None = None) -> None:
        self.prefixes = prefixes if prefixes is not None else Prefixes(TAG)
        self.runs: list[RunReader] = []
        self.own_lines = 0  # lines with the SGLang logger's prefix

    def feed(self, number: int, raw: str) -> LineKind:
        """Read physical line `number`; how it was counted."""
        line = unglue(clean(raw))
        _, body = self.prefixes.split(line)
        if OWN.match(body) is None and self.prefixes.learn_line(line):
            _, body = self.prefixes.split(line)
        if OWN.match(body) is not None:
            self.own_lines += 1
        run = self.runs[-1] if self.runs else None
        if run is None or run.starts_anew(body):
            run = RunReader(len(self.runs), number)
            self.runs.append(run)
        return run.feed(number, body)

    def skip(self, number: int) -> None:
        """Count line `number` as skipped in the latest run (a line cut mid-write)."""
        if not self.runs:
            self.runs.append(RunReader(0, number))
        self.runs[-1].out.skipped += 1
        self.runs[-1].out.last_line = number

    def finish(self) -> list[SglangRun]:
        """The runs, each with how it ends."""
        last = len(self.runs) - 1
        return [r.finish(replaced=i < last) for i, r in enumerate(self.runs)]


SGLANG_LOG = LogKind("an SGLang log", "the text file the server's output went to",
                    "starts with SGLang's `[YYYY-MM-DD hh:mm:ss]` logger prefix",
                    SglangLogError)


def read_lines(lines: Iterable[bytes], name: str = "input") -> SglangLog:
    """Read a log from its physical lines as bytes, each with its newline but a last one
    cut mid-write (dropped and reported); `name` is what errors call it."""
    reader, read = read_stream(
        lines, name, SGLANG_LOG,
        lambda head: LogReader(learn_prefixes(TAG, [unglue(clean(line)) for line in head])),
        lambda r: r.own_lines)
    return SglangLog(name, reader.finish(), read.lines, read.sha256, read.partial_line,
                     prefixes=reader.prefixes.shown())


def read_source(source: LogSource) -> SglangLog:
    """Read a source's files as one stream, line by line (never whole in memory)."""
    log, cut = read_stream_source(source, read_lines, SglangLogError)
    log.gzip_cut = cut
    return log


def read_file(path: str | Path) -> SglangLog:
    """Read the SGLang log at `path` (plain or gzip)."""
    return read_source(LogSource((Path(path),)))


def shipped(name: str) -> Path:
    """The shipped log `shipped:NAME` names; an unknown name raises SglangLogError listing
    the shipped ones."""
    try:
        return shipped_log(SHIPPED_DIR, name)
    except SourceError as exc:
        raise SglangLogError(str(exc)) from None


def sources(paths: list[Path]) -> list[LogSource]:
    """The sources the paths name (files, folders, rotated sets, `shipped:NAME`); a
    missing path raises SglangLogError."""
    try:
        return expand(paths, shipped)
    except SourceError as exc:
        raise SglangLogError(str(exc)) from None
