"""Follow a growing log file as `tail -F` does, losing nothing it could read: what was
appended since the last poll, in whole lines, through rotation (the path names another
file), truncation (the file is shorter than what was read) and a rewrite in place (a
restarted server reopens the path with O_TRUNC and may have written past the old offset
before the next poll: the bytes just before the offset changed).

A poll reads at most `read_limit` bytes (a line longer than that is read whole), so a
backlog of any size is read over as many polls as it takes, never held at once. Each file
the follower meets is held open from the poll that sees it, so a rotated file is read to
its last byte, however far behind reading is, before the next file is; the files rotated
away between two polls (or while no watch ran) are found beside the path, among the
files whose name extends the log's (`server.log.1`, `server.log-20240101`; compressed
ones are not read), by their modification time: written after the file being read,
before the one now at the path. A truncated or rewritten file whose unread bytes were
copied first (logrotate's `copytruncate`) is read on in the copy: the sibling holding the
same bytes before the offset. Bytes that could not be read are said, as a `Gap`, never
skipped in silence.

A position is a `Cursor`: the file's identity (device, inode) and the byte offset of the
first byte not yet read, with a digest of the bytes before it, so a later run can tell
whether the file it finds at the path (or beside it, rotated meanwhile) is still the one
it stopped in."""

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO

TAIL_BYTES = 64  # the bytes before the offset that must not change while the file is followed
READ_LIMIT = 1 << 22  # at most this much per poll, so one poll never holds a huge backlog
PACKED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".zip")  # rotated and compressed: not read

Identity = tuple[int, int]


class Switch(StrEnum):
    """Why reading moved on to another server's lines: another file from its start (the
    follower's switches), or a server started again within the file (the reader's)."""

    ROTATED = "rotated"      # the path names a new file (the old one was renamed)
    TRUNCATED = "truncated"  # the file is shorter than what had been read
    REWRITTEN = "rewritten"  # the bytes before the offset changed (reopened with O_TRUNC)
    APPEARED = "appeared"    # the path had no file, now it has
    RESTARTED = "restarted"  # a new server run in the same file (a restart appending)


class Loss(StrEnum):
    """Why bytes of the log could not be read."""

    TRUNCATED = "truncated"  # truncated or rewritten before its end was read, no copy found
    REPLACED = "replaced"    # truncated or rewritten while no watch ran, no copy found
    GONE = "gone"            # the file a watch stopped in is neither at the path nor beside it


LOSS_TEXT = {
    Loss.TRUNCATED: "was truncated or rewritten before it was read to its end, and no "
                    "copy of its unread bytes is beside it",
    Loss.REPLACED: "was truncated or rewritten since the last watch stopped in it, and no "
                   "copy of it is beside it: what it held after that point was not read",
    Loss.GONE: "is no longer at the path nor beside it (deleted or compressed since the "
               "last watch stopped in it): what it held after that point was not read",
}


@dataclass(frozen=True)
class Cursor:
    """Where reading stopped: the file (`dev`, `ino`), the offset of the first unread
    byte, the 1-based number of the line that starts there, and the sha256 of the up to
    TAIL_BYTES bytes before the offset."""

    dev: int
    ino: int
    offset: int
    line: int
    tail_sha: str


@dataclass(frozen=True)
class Chunk:
    """Whole lines read from one file: `data` starts at byte `start` and line `line`
    (1-based) of the file `dev`/`ino`; `switch` says, for the first chunk of a new
    file, why the follower moved to it."""

    dev: int
    ino: int
    start: int
    line: int
    data: bytes
    switch: Switch | None = None


@dataclass(frozen=True)
class Gap:
    """Bytes of the followed log that were not read: of the file `dev`/`ino`, from byte
    `offset` (line `line`) on, `lost` bytes of them (None: unknown), and why."""

    dev: int
    ino: int
    offset: int
    line: int
    lost: int | None
    why: Loss

    def text(self, path: Path) -> str:
        """One line saying what was lost."""
        size = f"{self.lost} byte(s)" if self.lost is not None else "an unknown number of bytes"
        return (f"{path}: lost {size} from byte {self.offset} (line {self.line}) of the file "
                f"{self.dev}/{self.ino}: it {LOSS_TEXT[self.why]}")


@dataclass
class _Source:
    """One open file being read: the identity its chunks carry (`dev`/`ino`: its own, or,
    for a copy, the file it was copied from), where reading got to, the bytes before that,
    the size it had at the last poll (what lies between is known unread), why reading
    moved to it (said by its first chunk), and a mark: up to TAIL_BYTES bytes it held at
    `mark_at`, before the offset or, before much was read, at its start, which a rewrite
    in place changes."""

    f: BinaryIO
    dev: int
    ino: int
    offset: int = 0
    line: int = 1
    tail: bytes = b""
    switch: Switch | None = None
    size: int = field(init=False)
    real: Identity = field(init=False)
    mark_at: int = field(init=False, default=0)
    mark: bytes = field(init=False, default=b"")

    def __post_init__(self) -> None:
        st = os.fstat(self.f.fileno())
        self.real = (st.st_dev, st.st_ino)  # the file the bytes come from
        self.size = st.st_size
        self.remark()

    @property
    def identity(self) -> Identity:
        """The file its chunks name."""
        return (self.dev, self.ino)

    def mtime_ns(self) -> int:
        """When its file was last written."""
        return os.fstat(self.f.fileno()).st_mtime_ns

    def remark(self) -> None:
        """Take the mark at the offset."""
        self.mark_at = max(0, self.offset - TAIL_BYTES)
        self.mark = os.pread(self.f.fileno(), TAIL_BYTES, self.mark_at)

    def marked(self, f: BinaryIO | None = None) -> bool:
        """Whether the file (or `f`) still holds the mark."""
        return os.pread((f or self.f).fileno(), len(self.mark), self.mark_at) == self.mark


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tail(f: BinaryIO, offset: int) -> bytes:
    """The up to TAIL_BYTES bytes before `offset`."""
    lo = max(0, offset - TAIL_BYTES)
    return os.pread(f.fileno(), offset - lo, lo)


def _open(path: Path) -> _Source | None:
    """The file at `path`, opened, or None when there is none (or it is no regular file)."""
    try:
        f = path.open("rb")
    except (FileNotFoundError, IsADirectoryError):
        return None
    st = os.fstat(f.fileno())
    return _Source(f, st.st_dev, st.st_ino)


class LogFollower:
    """Reads the file at `path` from `cursor` (None: from the start), poll by poll, at
    most `read_limit` bytes a poll; `gaps` collects what could not be read."""

    def __init__(self, path: Path, cursor: Cursor | None = None,
                 read_limit: int = READ_LIMIT) -> None:
        self.path = Path(path)
        self.read_limit = read_limit
        self.resumed = False
        self.gaps: list[Gap] = []
        self._src: _Source | None = None
        self._queue: list[_Source] = []  # the files that replaced `_src`, oldest first
        self._known: set[Identity] = set()  # every file opened: none is read twice
        if cursor is None:
            self._src = self._track(_open(self.path))
        else:
            self._resume(cursor)

    def _track(self, src: _Source | None) -> _Source | None:
        if src is not None:
            self._known.add(src.real)
        return src

    def _resume(self, cursor: Cursor) -> None:
        """Start at `cursor` in its file, at the path or rotated beside it; else say what
        was lost and start at the path's file."""
        here = self._track(_open(self.path))
        ident = (cursor.dev, cursor.ino)
        if here is not None and here.real == ident and self._holds(here, cursor):
            self._src = self._at(here, cursor)
            self.resumed = True
            return
        if here is not None and here.real == ident:  # truncated or rewritten meanwhile
            copy = self._copy_of(cursor, here.real)
            if copy is None:
                self.gaps.append(Gap(*ident, cursor.offset, cursor.line, None, Loss.REPLACED))
                self._src = here
                return
            self._src, self.resumed = self._at(copy, cursor), True
            here.switch = Switch.TRUNCATED
            self._queue.append(here)
            return
        old = self._sibling(lambda s: s.real == ident and self._holds(s, cursor))
        if old is None:
            self.gaps.append(Gap(*ident, cursor.offset, cursor.line, None, Loss.GONE))
            self._src = here
            if here is None:
                return
            here.switch = Switch.ROTATED
            return
        self._src, self.resumed = self._at(old, cursor), True
        if here is not None:
            self._queue_rotated(old, here)

    @staticmethod
    def _holds(src: _Source, cursor: Cursor) -> bool:
        """Whether `src` holds the bytes a cursor saw before its offset."""
        return (src.size >= cursor.offset
                and _sha(_tail(src.f, cursor.offset)) == cursor.tail_sha)

    @staticmethod
    def _at(src: _Source, cursor: Cursor) -> _Source:
        """`src` positioned at `cursor`, its chunks naming the cursor's file."""
        src.dev, src.ino = cursor.dev, cursor.ino
        src.offset, src.line = cursor.offset, cursor.line
        src.tail = _tail(src.f, cursor.offset)
        src.remark()
        return src

    def _siblings(self) -> list[Path]:
        """The files beside the path whose name extends it (its rotated copies)."""
        try:
            names = os.listdir(self.path.parent)
        except FileNotFoundError:
            return []
        stem = self.path.name
        return [self.path.parent / n for n in sorted(names)
                if n.startswith(stem) and n != stem and not n.endswith(PACKED)]

    def _sibling(self, wanted: Callable[[_Source], bool]) -> _Source | None:
        """The first file beside the path that `wanted` accepts, opened (others closed)."""
        for p in self._siblings():
            src = _open(p)
            if src is None:
                continue
            if src.real not in self._known and wanted(src):
                return self._track(src)
            src.f.close()
        return None

    def _copy_of(self, cursor: Cursor, exclude: Identity) -> _Source | None:
        """A file beside the path holding what the cursor's file held before the cursor,
        and more (a copy made before it was truncated)."""
        if cursor.offset == 0:
            return None  # nothing read: no bytes to recognise a copy by
        return self._sibling(lambda s: s.real != exclude and s.size > cursor.offset
                             and self._holds(s, cursor))

    def _copy_of_source(self, src: _Source) -> _Source | None:
        """A file beside the path holding `src`'s mark, and bytes past its offset (a copy
        made before `src` was truncated)."""
        if not src.mark:
            return None  # nothing seen: no bytes to recognise a copy by
        return self._sibling(lambda s: s.real != src.real and s.size > src.offset
                             and src.marked(s.f))

    def _queue_rotated(self, newest: _Source, here: _Source) -> None:
        """The path names `here`, a file not seen yet: queue the files rotated away between
        `newest` and it (written after the one, before the other), then it."""
        low, high = newest.mtime_ns(), here.mtime_ns()
        between: list[_Source] = []
        for p in self._siblings():
            src = _open(p)
            if src is None:
                continue
            m = src.mtime_ns()
            if src.real in self._known or src.real == here.real or not low <= m <= high:
                src.f.close()
                continue
            self._known.add(src.real)
            between.append(src)
        between.sort(key=lambda s: (s.mtime_ns(), s.real))
        for src in [*between, here]:
            src.switch = Switch.ROTATED
            self._queue.append(src)

    def cursor(self) -> Cursor | None:
        """Where the next poll reads from (None: no file yet)."""
        src = self._src
        if src is None:
            return None
        return Cursor(src.dev, src.ino, src.offset, src.line, _sha(src.tail))

    def cursor_at(self, offset: int, line: int) -> Cursor:
        """A cursor at an earlier `offset` (line `line`) of the file being read."""
        src = self._src
        assert src is not None, "cursor_at needs a file being read"
        return Cursor(src.dev, src.ino, offset, line, _sha(_tail(src.f, offset)))

    def head(self, limit: int) -> bytes:
        """The first bytes of the file being read, up to `limit` and to the offset."""
        src = self._src
        if src is None:
            return b""
        return os.pread(src.f.fileno(), min(limit, src.offset), 0)

    def close(self) -> None:
        """Close every file held."""
        for src in [self._src, *self._queue]:
            if src is not None:
                src.f.close()
        self._src, self._queue = None, []

    def poll(self) -> list[Chunk]:
        """The whole lines appended since the last poll, at most `read_limit` bytes (but a
        longer line): from the file being read, and once it is read to its end, from the
        files that replaced it (rotation, truncation, rewrite), each its own chunk."""
        if self._src is None:
            self._src = self._track(_open(self.path))
            if self._src is None:
                return []
            self._src.switch = Switch.APPEARED
        self._look()
        return self._read_some()

    def _look(self) -> None:
        """Notice a new file at the path (queued behind the ones being read), or the file
        at the path (being read, or queued) truncated or rewritten."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return  # renamed away, the new one not created yet: read the old one on
        now = (st.st_dev, st.st_ino)
        src = self._src
        assert src is not None
        newest = self._queue[-1] if self._queue else src
        if now != newest.real:
            if now in self._known:
                return  # a file already read is back at the path: it is not read again
            here = self._track(_open(self.path))
            if here is not None:
                self._queue_rotated(newest, here)
            return
        if st.st_size < newest.size:
            self._replace(newest, Switch.TRUNCATED)
        elif not newest.marked():
            self._replace(newest, Switch.REWRITTEN)

    def _replace(self, src: _Source, why: Switch) -> None:
        """`src`, the file at the path (being read, or waiting its turn), lost the bytes it
        had from its offset on: read them from a copy beside it if there is one, else say
        how many are known lost; then read the file again from its start."""
        copy = self._copy_of_source(src)
        unread = src.size - src.offset
        again = _Source(src.f, *src.real, switch=why)
        order = [again]
        if copy is not None:
            unread -= copy.size - src.offset
            copy.dev, copy.ino, copy.switch = src.dev, src.ino, src.switch
            copy.offset, copy.line, copy.tail = src.offset, src.line, src.tail
            copy.remark()
            order = [copy, again]
        if src is self._src:
            self._src, self._queue = order[0], order[1:]
        else:
            self._queue[-1:] = order
        if unread > 0:
            self.gaps.append(Gap(src.dev, src.ino, src.offset, src.line, unread,
                                 Loss.TRUNCATED))

    def _read_some(self) -> list[Chunk]:
        """Read up to the limit: the file being read, and, each time one is read to its
        end with another queued behind it, the next."""
        out: list[Chunk] = []
        budget = self.read_limit
        while self._src is not None and budget > 0:
            chunk, at_end = self._read(self._src, budget)
            if chunk is not None:
                out.append(chunk)
                budget -= len(chunk.data)
            if not at_end or not self._queue:
                break
            last = self._last_line(self._src)
            if last is not None:
                out.append(last)
                budget -= len(last.data)
            if all(s.f is not self._src.f for s in self._queue):
                self._src.f.close()
            self._src = self._queue.pop(0)
        for src in [self._src, *self._queue[-1:]]:
            if src is not None:  # what the file at the path is known to hold from now
                src.size = os.fstat(src.f.fileno()).st_size
        return out

    def _read(self, src: _Source, budget: int) -> tuple[Chunk | None, bool]:
        """Whole lines from the offset on, about `budget` bytes (a last line without its
        newline waits); whether the file's end was reached."""
        fd = src.f.fileno()
        data = os.pread(fd, budget, src.offset)
        at_end = len(data) < budget
        while not at_end and b"\n" not in data:  # one line longer than the budget: whole
            more = os.pread(fd, self.read_limit, src.offset + len(data))
            data += more
            at_end = len(more) < self.read_limit
        end = data.rfind(b"\n") + 1
        if not end:
            return None, at_end
        return self._take(src, data[:end]), at_end

    def _last_line(self, src: _Source) -> Chunk | None:
        """A file left for the next: its last line, cut (no newline), given whole."""
        rest = os.pread(src.f.fileno(), os.fstat(src.f.fileno()).st_size - src.offset,
                        src.offset)
        return self._take(src, rest + b"\n") if rest else None

    @staticmethod
    def _take(src: _Source, data: bytes) -> Chunk:
        """`data` (whole lines at the offset) as a chunk; the offset moves past it."""
        chunk = Chunk(src.dev, src.ino, src.offset, src.line, data, src.switch)
        src.switch = None
        src.offset += len(data)
        src.line += data.count(b"\n")
        src.tail = (src.tail + data)[-TAIL_BYTES:]
        src.remark()
        return chunk
