"""Follow a growing log file as `tail -F` does: read what was appended since the last
poll, in whole lines, and survive rotation (the path now names another file: the old one
is read to its end first), truncation (the file is shorter than what was read) and a
rewrite in place (a restarted server reopens the path with O_TRUNC and may have written
past the old offset before the next poll: the bytes just before the offset changed).

A position is a `Cursor`: the file's identity (device, inode) and the byte offset of the
first byte not yet read, with a digest of the bytes before it, so a later run can tell
whether the file it finds at the path is still the one it stopped in."""

import hashlib
import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO

TAIL_BYTES = 64  # the bytes before the offset that must not change while the file is followed
READ_LIMIT = 1 << 22  # at most this much per poll, so one poll never holds a huge backlog


class Switch(StrEnum):
    """Why the follower started reading another file from its start."""

    ROTATED = "rotated"      # the path names a new file (the old one was renamed)
    TRUNCATED = "truncated"  # the file is shorter than what had been read
    REWRITTEN = "rewritten"  # the bytes before the offset changed (reopened with O_TRUNC)
    APPEARED = "appeared"    # the path had no file, now it has


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


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tail(f: BinaryIO, offset: int) -> bytes:
    """The up to TAIL_BYTES bytes before `offset`."""
    lo = max(0, offset - TAIL_BYTES)
    f.seek(lo)
    return f.read(offset - lo)


class LogFollower:
    """Reads the file at `path` from `cursor` (None: from the start), poll by poll."""

    def __init__(self, path: Path, cursor: Cursor | None = None) -> None:
        self.path = Path(path)
        self._f: BinaryIO | None = None
        self._dev = self._ino = 0
        self.offset = 0
        self.line = 1
        self._tail = b""
        self._pending: Switch | None = None
        self.resumed = False
        self._open(cursor)

    def _open(self, cursor: Cursor | None) -> None:
        """Open the file at the path; at `cursor` when it is still the same file there."""
        try:
            f = self.path.open("rb")
        except FileNotFoundError:
            return
        st = os.fstat(f.fileno())
        self._f, self._dev, self._ino = f, st.st_dev, st.st_ino
        self.offset, self.line, self._tail = 0, 1, b""
        if (cursor is not None and (cursor.dev, cursor.ino) == (st.st_dev, st.st_ino)
                and st.st_size >= cursor.offset
                and _sha(_tail(f, cursor.offset)) == cursor.tail_sha):
            self.offset, self.line = cursor.offset, cursor.line
            self._tail = _tail(f, cursor.offset)
            self.resumed = True

    def cursor(self) -> Cursor | None:
        """Where the next poll reads from (None: no file yet)."""
        if self._f is None:
            return None
        return Cursor(self._dev, self._ino, self.offset, self.line, _sha(self._tail))

    def cursor_at(self, offset: int, line: int) -> Cursor:
        """A cursor at an earlier `offset` (line `line`) of the file being read."""
        assert self._f is not None
        return Cursor(self._dev, self._ino, offset, line, _sha(_tail(self._f, offset)))

    def close(self) -> None:
        """Close the file."""
        if self._f is not None:
            self._f.close()
            self._f = None

    def poll(self) -> list[Chunk]:
        """The whole lines appended since the last poll: from the current file, and from
        the file that replaced it (rotation, truncation, rewrite), each its own chunk."""
        if self._f is None:
            self._open(None)
            if self._f is None:
                return []
            self._pending = Switch.APPEARED
        out: list[Chunk] = []
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None  # renamed away, the new one not created yet: read the old one on
        if st is not None and (st.st_dev, st.st_ino) != (self._dev, self._ino):
            out += self._read()  # the rest of the rotated file
            self.close()
            self._open(None)
            self._pending = Switch.ROTATED
        elif st is not None and st.st_size < self.offset:
            self._restart(Switch.TRUNCATED)
        elif self.offset and _tail(self._f, self.offset) != self._tail:  # type: ignore[arg-type]
            self._restart(Switch.REWRITTEN)
        out += self._read()
        return out

    def _restart(self, why: Switch) -> None:
        self.offset, self.line, self._tail = 0, 1, b""
        self._pending = why

    def _read(self) -> list[Chunk]:
        """Whole lines from the offset on (a last line without its newline waits)."""
        f = self._f
        if f is None:
            return []
        f.seek(self.offset)
        data = f.read(READ_LIMIT)
        end = data.rfind(b"\n") + 1
        if not end:
            return []
        data = data[:end]
        chunk = Chunk(self._dev, self._ino, self.offset, self.line, data, self._pending)
        self._pending = None
        self.offset += end
        self.line += data.count(b"\n")
        self._tail = data[-TAIL_BYTES:] if end >= TAIL_BYTES else _tail(f, self.offset)
        return [chunk]
