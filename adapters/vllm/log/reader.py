"""Read a vLLM server log into its server runs (adapters/vllm/log/run.py), whatever a user
kept: the server's own output or a log shipper's, behind any outer prefix (learned per file,
adapters/logs/prefix.py), several servers one after another (a start after one served or
shut down, or another API server process) in one file, a piece of a thread, a rotated set or
a gzip file (adapters/logs/sources.py). A file whose last line has no newline was cut while
being written: that line is dropped and reported. Text with no vLLM line at all is refused
in one line."""

from collections.abc import Iterable
from pathlib import Path

from adapters.logs.intervals.run import IntervalLog, RunEnding, ServerRun
from adapters.logs.prefix import Prefixes, clean, learn_prefixes
from adapters.logs.reading import LogKind, read_stream
from adapters.logs.reading import read_source as read_stream_source
from adapters.logs.sources import LogSource, SourceError, shipped_log
from adapters.vllm.errors import VllmError
from adapters.vllm.log.lines import TAG, split_line
from adapters.vllm.log.run import LineKind, RunReader

SHIPPED_DIR = Path(__file__).with_name("shipped")
"""vLLM logs the package carries (SOURCE.md there says what each is)."""


class VllmLogError(VllmError):
    """The input is not a vLLM server log (or cannot be read as text)."""


class FileRuns:
    """The runs of one file as its lines come (`read_lines` feeds it a whole file,
    `specledger watch --vllm-log` a live one): `done` the runs ended, `current` the one
    being read."""

    def __init__(self, prefixes: Prefixes) -> None:
        self.prefixes = prefixes
        self.done: list[ServerRun] = []
        self.current: RunReader | None = None
        self.vllm_lines = 0

    def feed(self, number: int, raw: str) -> None:
        """Read physical line `number`."""
        line = clean(raw)
        _, body = self.prefixes.split(line)
        parts = split_line(body)
        if not parts.tagged and self.prefixes.learn_line(line):
            _, body = self.prefixes.split(line)
            parts = split_line(body)
        self.vllm_lines += parts.tagged
        run = self.current
        if run is None:
            run = self._open(number, parts.pid if parts.proc == "APIServer" else None)
        kind = run.feed(number, parts, body)
        if kind is LineKind.NEW_RUN:
            self._close(RunEnding.DIED if run.run.failures and not run.shutting_down
                        else RunEnding.SHUTDOWN if run.shutting_down else RunEnding.LOG_ENDS)
            self._open(number, parts.pid if parts.proc == "APIServer" else None
                       ).feed(number, parts, body)

    def skip(self, number: int) -> None:
        (self.current or self._open(number, None)).run.skipped += 1

    def _open(self, number: int, pid: int | None) -> RunReader:
        self.current = RunReader(len(self.done), number, pid)
        return self.current

    def _close(self, ending: RunEnding | None = None) -> None:
        if self.current is not None:
            self.done.append(self.current.finish(ending))
            self.current = None

    def finish(self) -> list[ServerRun]:
        """Every run, the last one ended where the file ends."""
        self._close()
        return self.done


VLLM_LOG = LogKind("a vLLM log", "the text file the server's stdout/stderr went to",
                  "has the shape of a vLLM line (`(APIServer pid=N) INFO MM-DD hh:mm:ss "
                  "[file.py:N] ...`)", VllmLogError)


def read_lines(lines: Iterable[bytes], name: str = "input") -> IntervalLog:
    """Read a log from its physical lines as bytes (each with its newline but a last one
    cut mid-write, which is dropped and reported), as they come; `name` is what errors
    call it."""
    runs, read = read_stream(
        lines, name, VLLM_LOG,
        lambda head: FileRuns(learn_prefixes(TAG, [clean(line) for line in head])),
        lambda r: r.vllm_lines)
    return IntervalLog(name, runs.finish(), read.lines, read.sha256, read.partial_line,
                       prefixes=runs.prefixes.shown())


def read_source(source: LogSource) -> IntervalLog:
    """Read a source's files as one stream, line by line; a cut gzip part is read as far
    as it goes, and the last cut is reported."""
    log, cut = read_stream_source(source, read_lines, VllmLogError)
    log.gzip_cut = cut
    return log


def read_file(path: str | Path) -> IntervalLog:
    """Read the vLLM log file at `path` (plain or gzip)."""
    return read_source(LogSource((Path(path),)))


def shipped(name: str) -> Path:
    """The shipped log `shipped:NAME` names; an unknown name raises VllmLogError listing
    the shipped ones."""
    try:
        return shipped_log(SHIPPED_DIR, name)
    except SourceError as exc:
        raise VllmLogError(str(exc)) from None
