"""A log's physical lines read into an engine's line reader, the same way for every engine:
the first lines teach the file's prefixes, a NUL byte among them means a binary file, the
text is digested as it passes, a last line without its newline (cut while being written)
is skipped and reported, and a stream with no line of the engine's shape is refused."""

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain, islice
from typing import Protocol, TypeVar

from adapters.logs.compressed import GzipCut
from adapters.logs.prefix import LEARN_LINES
from adapters.logs.sources import LogSource, SourceError, Stream


class LineReader(Protocol):
    """An engine's reader of one file: a call per physical line, in order."""

    def feed(self, number: int, line: str) -> object:
        """Read physical line `number` (its newline removed)."""

    def skip(self, number: int) -> None:
        """Count line `number` as skipped (a line cut mid-write)."""


@dataclass(frozen=True)
class LogKind:
    """What an engine's errors call its log: `what` ("a vLLM log"), the file a user
    should pass instead of a binary one, what its lines look like (the end of "none of its
    N line(s) ..."), and the error type raised."""

    what: str
    text_file: str
    shape: str
    error: type[Exception]


@dataclass(frozen=True)
class LinesRead:
    """What the stream itself was: its physical lines, the sha256 of its bytes, and the
    last line when it was cut mid-write."""

    lines: int
    sha256: str
    partial_line: int | None


R = TypeVar("R", bound=LineReader)
L = TypeVar("L")


def read_stream(lines: Iterable[bytes], name: str, kind: LogKind,
                start: Callable[[list[str]], R], own_lines: Callable[[R], int]
                ) -> tuple[R, LinesRead]:
    """Feed `lines` (bytes, each with its newline but a cut last one) to the reader that
    `start` makes from the file's first lines (decoded, newlines removed), as they come, so
    a file of any size is never held whole; `own_lines` counts the lines of the engine's
    shape the reader saw. `name` is what errors call the stream."""
    it = iter(lines)
    head = list(islice(it, LEARN_LINES))
    if not head:
        raise kind.error(f"{name} is not {kind.what}: it is empty (0 lines)")
    if any(b"\x00" in raw for raw in head):
        raise kind.error(f"{name} is binary, not {kind.what} (pass {kind.text_file})")
    # Byte-level tokens print raw bytes: a lone byte of a UTF-8 sequence is no error.
    reader = start([raw.decode("utf-8", "surrogateescape").rstrip("\n") for raw in head])
    digest = hashlib.sha256()
    number, partial = 0, None
    for raw in chain(head, it):
        digest.update(raw)
        number += 1
        if raw.endswith(b"\n"):
            reader.feed(number, raw[:-1].decode("utf-8", "surrogateescape"))
        else:  # only a last line can lack its newline: it was cut while being written
            partial = number
            reader.skip(number)
    if not own_lines(reader):
        raise kind.error(f"{name} is not {kind.what}: none of its {number} line(s) "
                         f"{kind.shape}")
    return reader, LinesRead(number, digest.hexdigest(), partial)


def read_source(source: LogSource, read_lines: Callable[[Iterable[bytes], str], L],
                error: type[Exception]) -> tuple[L, GzipCut | None]:
    """A source's files read as one stream by `read_lines`, and where a gzip part of it
    was cut (read as far as it goes); a source that cannot be read raises `error`."""
    stream = Stream(source.parts)
    try:
        log = read_lines(stream.lines(), source.name)
    except SourceError as exc:
        raise error(str(exc)) from None
    return log, stream.cut
