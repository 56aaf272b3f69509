"""Cut a followed log into pieces, read them with the import's reader, and number their
records as lines of the file.

The reader (adapters/llama/log/reader.py, its `LogReader` fed line by line, one per file
followed) folds a line's continuations into it: a token whose text holds a newline goes on
over the next physical lines, a `sampler params:` line is followed by tab-indented ones.
A piece therefore ends just before a line that starts a new log line (the logger's time
prefix), and the last line read waits until the next one shows it is whole, or until the
log has been quiet for `settle_s` (the server writes a line and its continuations at
once). A log without time prefixes is cut at every line. The reader tells the server runs
of a file apart: a server started again, appending to the same file, begins a run of its
own, and its first piece says so (`restart`).
"""

import re
import time
from dataclasses import dataclass, field, fields

from adapters.llama.log.facts import ServerInfo
from adapters.llama.log.reader import LogReader
from adapters.llama.log.records import Record, RecordKind

_STARTS = re.compile(rb"^\d+\.\d{2}\.\d{3}\.\d{3} ", re.MULTILINE)


@dataclass
class Piece:
    """The records of whole lines of one server run, numbered as lines of the file, the
    run's facts so far, where each task's first line starts (`starts`: line -> (byte
    offset, the line's bytes)), and whether the run began after another of the same file
    (`restart`: a server started again)."""

    records: list[Record]
    server: ServerInfo
    starts: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    restart: bool = False


@dataclass
class LineCounts:
    """How the lines read so far were counted (the reader's LogReading counts)."""

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
    show it is whole. `server` holds the facts of the run being read."""

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
        self._reader = LogReader()
        self._run: int | None = None  # the index of the run being read
        self._counted = LineCounts()  # what the readers of earlier files counted

    def reset(self, start: int = 0, line: int = 1) -> None:
        """Start over on another file (what was buffered belonged to the old one)."""
        self._buf, self.offset, self.line = b"", start, line
        self.server = ServerInfo()
        self._counted = LineCounts(**self._totals())
        self._reader, self._run = LogReader(), None

    def feed(self, data: bytes, start: int, line: int) -> None:
        """Whole lines starting at byte `start`, line `line` of the file."""
        if not self._buf:
            self.offset, self.line = start, line
        self._buf += data
        self._fed = time.monotonic()
        self._prefixed = self._prefixed or _STARTS.search(data) is not None

    def take(self, force: bool = False) -> list[Piece]:
        """The records of the lines known whole (all of them once the log settled, or
        with `force`), a piece per server run they belong to; none when there are none
        yet."""
        if not self._buf:
            return []
        cut = len(self._buf)
        settled = force or time.monotonic() - self._fed >= self.settle_s
        if self._prefixed and not settled:
            cut = _last_start(self._buf)
        if not cut:
            return []
        data, self._buf = self._buf[:cut], self._buf[cut:]
        pieces = self._parse(data, self.offset, self.line)
        self.offset += cut
        self.line += data.count(b"\n")
        return pieces

    def _totals(self) -> dict[str, int]:
        runs = [r.out for r in self._reader.runs]
        base = self._counted
        return {"lines": self.counts.lines, "parsed": base.parsed + sum(r.parsed for r in runs),
                "skipped": base.skipped + sum(r.skipped for r in runs),
                "unknown": base.unknown + sum(r.unknown for r in runs)}

    def _parse(self, data: bytes, start: int, line: int) -> list[Piece]:
        physical = data.decode("utf-8", errors="surrogateescape").split("\n")[:-1]
        for i, raw in enumerate(physical):
            self._reader.feed(line + i, raw)
        self.counts.lines += len(physical)
        self.counts = LineCounts(**self._totals())
        pieces = []
        first = self._run if self._run is not None else 0
        for run in self._reader.runs[first:]:
            restart = self._run is not None and run.out.index != self._run
            if restart:
                self.server = ServerInfo()
            self._run = run.out.index
            merge_facts(self.server, run.out.server)
            # Compute brackets time a round for `calibrate`, which reads the whole file;
            # nothing the watch folds uses them.
            records = [r for r in run.out.records if r.kind is not RecordKind.COMPUTE]
            run.out.records.clear()  # taken: a run serving for weeks holds none of them
            if records or restart:
                pieces.append(Piece(records, self.server, restart=restart))
        self._place_starts(pieces, data, start, line)
        return pieces

    @staticmethod
    def _place_starts(pieces: list[Piece], data: bytes, start: int, line: int) -> None:
        """Each piece's task starts: the byte offset and bytes of the line a task begins."""
        wanted = {r.line for p in pieces for r in p.records
                  if r.kind is RecordKind.TASK_STARTED}
        if not wanted:
            return
        at: dict[int, tuple[int, bytes]] = {}
        pos = 0
        for number, raw in enumerate(data.split(b"\n"), line):
            if number in wanted:
                at[number] = (start + pos, raw)
            pos += len(raw) + 1
        for p in pieces:
            p.starts = {r.line: at[r.line] for r in p.records
                        if r.kind is RecordKind.TASK_STARTED and r.line in at}


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
