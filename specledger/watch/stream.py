"""Cut a followed log into pieces the import's reader parses whole, and number their
records as lines of the file.

The reader (adapters/llama/logread.py) folds a line's continuations into it: a token
whose text holds a newline goes on over the next physical lines, a `sampler params:`
line is followed by tab-indented ones. A piece therefore ends just before a line that
starts a new log line (the logger's time prefix), and the last line read waits until
the next one shows it is whole, or until the log has been quiet for `settle_s` (the
server writes a line and its continuations at once). A log without time prefixes is cut
at every line.
"""

import re
import time
from dataclasses import dataclass, field, fields, replace

from adapters.llama.log.facts import ServerInfo
from adapters.llama.log.reader import LogFormatError, parse_log
from adapters.llama.log.records import Record, RecordKind

_STARTS = re.compile(rb"^\d+\.\d{2}\.\d{3}\.\d{3} ", re.MULTILINE)


@dataclass
class Piece:
    """The records of whole lines, numbered as lines of the file, and where each task's
    first line starts (`starts`: line -> (byte offset, the line's bytes))."""

    records: list[Record]
    server: ServerInfo
    starts: dict[int, tuple[int, bytes]] = field(default_factory=dict)


@dataclass
class LineCounts:
    """How the lines read so far were counted (logread.LogReading's counts)."""

    lines: int = 0
    parsed: int = 0
    skipped: int = 0
    unknown: int = 0


def merge_facts(into: ServerInfo, new: ServerInfo) -> None:
    """Take `new`'s facts that `into` does not have yet (the first occurrence counts, as
    in one reading of the whole log)."""
    blank = ServerInfo()
    for f in fields(ServerInfo):
        mine, theirs = getattr(into, f.name), getattr(new, f.name)
        if isinstance(mine, list):
            mine.extend(v for v in theirs if v not in mine)
        elif mine == getattr(blank, f.name) and theirs != mine:
            setattr(into, f.name, theirs)


class RecordStream:
    """Whole lines in, records out; `settle_s`: how long a last line waits for the log to
    show it is whole."""

    def __init__(self, settle_s: float = 0.05) -> None:
        self.settle_s = settle_s
        self.counts = LineCounts()
        self.server = ServerInfo()
        self._buf = b""
        self.offset = 0
        """The file offset of the first byte not yet taken (`_buf`'s first)."""
        self.line = 1
        """The number of the first line not yet taken (`_buf`'s first)."""
        self._fed = 0.0
        self._prefixed = False

    def reset(self, start: int = 0, line: int = 1) -> None:
        """Start over on another file (what was buffered belonged to the old one)."""
        self._buf, self.offset, self.line = b"", start, line
        self.server = ServerInfo()

    def feed(self, data: bytes, start: int, line: int) -> None:
        """Whole lines starting at byte `start`, line `line` of the file."""
        if not self._buf:
            self.offset, self.line = start, line
        self._buf += data
        self._fed = time.monotonic()
        self._prefixed = self._prefixed or _STARTS.search(data) is not None

    def take(self, force: bool = False) -> Piece | None:
        """The records of the lines known whole (all of them once the log settled, or
        with `force`); None when there are none yet."""
        if not self._buf:
            return None
        cut = len(self._buf)
        settled = force or time.monotonic() - self._fed >= self.settle_s
        if self._prefixed and not settled:
            cut = _last_start(self._buf)
        if not cut:
            return None
        data, self._buf = self._buf[:cut], self._buf[cut:]
        piece = self._parse(data, self.offset, self.line)
        self.offset += cut
        self.line += data.count(b"\n")
        return piece

    def _parse(self, data: bytes, start: int, line: int) -> Piece:
        text = data.decode("utf-8", errors="surrogateescape")
        n = data.count(b"\n")
        self.counts.lines += n
        try:
            reading = parse_log(text)
        except LogFormatError:  # no llama-server line in it (a blank stretch, say)
            self.counts.skipped += n
            return Piece([], ServerInfo())
        self.counts.parsed += reading.parsed
        self.counts.skipped += reading.skipped
        self.counts.unknown += reading.unknown
        merge_facts(self.server, reading.server)
        shift = line - 1
        # Compute brackets span lines and chain across them, so a piece cut between two
        # would read them otherwise than the whole log; they time a round for `calibrate`,
        # which reads the whole file, and nothing the watch folds uses them.
        records = [replace(r, line=r.line + shift) for r in reading.records
                   if r.kind is not RecordKind.COMPUTE]
        piece = Piece(records, reading.server)
        wanted = {r.line for r in reading.records if r.kind is RecordKind.TASK_STARTED}
        if wanted:
            pos = 0
            for number, raw in enumerate(data.split(b"\n"), 1):
                if number in wanted:
                    piece.starts[number + shift] = (start + pos, raw)
                pos += len(raw) + 1
        return piece


def _last_start(buf: bytes) -> int:
    """Where the last line of `buf` that starts a log line (a time prefix) begins; 0 when
    none does after the first."""
    end = len(buf) - 1  # the final newline
    while end > 0:
        begin = buf.rfind(b"\n", 0, end) + 1
        if _STARTS.match(buf, begin):
            return begin
        end = begin - 1
    return 0
