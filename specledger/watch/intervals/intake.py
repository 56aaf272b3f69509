"""The interval watch's first stage: read the log and hand its lines to the engine's
reader, one reader per file followed (lines.py), noting where each server run begins: the
byte offset and bytes of its first line, its key. The stage owns where reading got to
(the log's row of `watch_cursors`): the first line of the run still open, else the first
line not read; and, resumed there, it knows the runs it reads again by their keys."""

from sqlalchemy import Engine

from specledger.watch.follower import Chunk, LogFollower
from specledger.watch.intervals.lines import READERS, RunLines
from specledger.watch.intervals.live import LiveRun, RunPlace
from specledger.watch.options import WatchOptions
from specledger.watch.requests import request_key
from specledger.watch.store import load_cursor, recorded_sessions, save_cursor
from specledger.watch.tally import WatchTally


class RunFile:
    """One file being read: its identity, the engine's reader, each run's session (in
    run order), how many of them are closed, the plain runs ended (the speculative ones'
    baseline), and where reading got to."""

    def __init__(self, lines: RunLines, dev: int, ino: int, offset: int, line: int) -> None:
        self.lines, self.dev, self.ino = lines, dev, ino
        self.live: list[LiveRun] = []
        self.closed = 0
        self.peers: list[dict[str, object]] = []
        self.offset, self.line = offset, line

    def resume_at(self) -> tuple[int, int]:
        """Where a later watch starts: the first line of the run still open, else the
        first line not read (offset, line)."""
        if self.closed < len(self.live):
            place = self.live[self.closed].place
            return place.start, place.line
        return self.offset, self.line


class RunIntake:
    """Reads the log `opts.log` of `opts.engine` from where the last watch of it stopped
    into the ledger behind `engine`."""

    def __init__(self, engine: Engine, opts: WatchOptions, tally: WatchTally) -> None:
        self.engine, self.opts, self.log, self.tally = engine, opts, str(opts.log), tally
        cursor = load_cursor(engine, self.log)
        self.follower = LogFollower(opts.log, cursor, opts.read_limit)
        self.file: RunFile | None = None
        self._earlier: dict[str, int] = {}  # key -> session, of the runs read again
        if self.follower.resumed and cursor is not None:
            tally.resumed_at = cursor.offset
            self._earlier = recorded_sessions(engine, self.log, cursor.offset)
            self.file = RunFile(READERS[opts.engine](), cursor.dev, cursor.ino,
                                cursor.offset, cursor.line)

    def poll(self) -> list[Chunk]:
        """The whole lines appended since the last poll, for `feed`."""
        return self.follower.poll()

    def feed(self, chunks: list[Chunk]) -> list[RunFile]:
        """Feed the chunks' lines to their file's reader; the files they replaced (a new
        file's first chunk ends the one before)."""
        ended = []
        for chunk in chunks:
            if chunk.switch is not None or self.file is None:
                if chunk.switch is not None:
                    self.tally.switches.append(chunk.switch.value)
                if self.file is not None:
                    ended.append(self.file)
                self.file = RunFile(READERS[self.opts.engine](), chunk.dev, chunk.ino,
                                    chunk.start, chunk.line)
            self._lines(self.file, chunk)
        return ended

    def _lines(self, f: RunFile, chunk: Chunk) -> None:
        offset = chunk.start
        for number, raw in enumerate(chunk.data.split(b"\n")[:-1], chunk.line):
            begun = f.lines.count()
            f.lines.feed(number, raw.decode("utf-8", errors="surrogateescape"))
            if f.lines.count() > begun:  # this line begins a run
                key = request_key(f.dev, f.ino, offset, raw)
                f.live.append(LiveRun(self.engine, RunPlace(self.log, offset, number, key),
                                      self._earlier.pop(key, None)))
            offset += len(raw) + 1
        f.offset, f.line = offset, chunk.line + chunk.data.count(b"\n")

    def save(self) -> None:
        """Save where reading resumes (`RunFile.resume_at`)."""
        f, cur = self.file, self.follower.cursor()
        if f is None or cur is None or (cur.dev, cur.ino) != (f.dev, f.ino):
            return  # the follower moved on to the next file; its first chunk saves it
        save_cursor(self.engine, self.log, self.follower.cursor_at(*f.resume_at()))

    def close(self) -> None:
        """Close the log."""
        self.follower.close()
