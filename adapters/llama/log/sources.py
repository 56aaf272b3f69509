"""llama-server logs from what a user's disk holds (adapters/logs/sources.py: files,
folders, rotated sets, each one stream of lines), and the real logs the package ships
(`shipped:NAME`, for the README's first example)."""

from pathlib import Path

from adapters.llama.log.reader import LogFile, LogFormatError, LogReading, read_lines
from adapters.logs.reading import read_source as read_stream_source
from adapters.logs.sources import LogSource, SourceError, shipped_log
from adapters.logs.sources import expand as expand_paths

SHIPPED_DIR = Path(__file__).with_name("shipped")
"""Real logs users published that the package carries (SOURCE.md there says whose)."""


def shipped(name: str) -> Path:
    """The shipped log `shipped:NAME` names; an unknown name raises LogFormatError listing
    the shipped ones."""
    try:
        return shipped_log(SHIPPED_DIR, name)
    except SourceError as exc:
        raise LogFormatError(str(exc)) from None


def expand(paths: list[Path]) -> list[LogSource]:
    """The sources the paths name, a shipped log's name among them; a missing path raises
    LogFormatError."""
    try:
        return expand_paths(paths, shipped)
    except SourceError as exc:
        raise LogFormatError(str(exc)) from None


def read_source(source: LogSource) -> LogFile:
    """Read a source's files as one stream, line by line (never whole in memory); a cut
    gzip part is read as far as it goes, and the last cut is reported."""
    log, cut = read_stream_source(source, read_lines, LogFormatError)
    log.gzip_cut = cut
    for run in log.runs:
        run.gzip_cut = cut
    return log


def read_file(path: str | Path) -> LogFile:
    """Read the log file at `path` (plain, or gzip-compressed as rotated logs are; a cut
    gzip file is read as far as it goes); unreadable or non-log files raise
    LogFormatError."""
    return read_source(LogSource((Path(path),)))


def read_log(path: str | Path) -> LogReading:
    """The one server run of the log file at `path` (several are refused)."""
    return read_file(path).only()
