"""What a user's disk holds, as log sources for any engine's reader: files, folders of
logs, and rotated sets, each read as one stream of physical lines.

A rotated set is one server's log cut by logrotate (`server.log.2.gz server.log.1
server.log`, or dated `server.log-20260514.gz`): its files are read in order, oldest first,
as one stream, so a request that spans a rotation is one request. Files given on the command
line or found in a folder are grouped into sets by their name less the rotation suffix; any
other file is a source of its own. A folder contributes its files (not hidden ones, not
sub-folders), in name order. A file is read as it streams (plain a MiB at a time, gzip a
piece at a time), never whole.
"""

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from adapters.logs.compressed import GZIP_MAGIC, Gunzip, GzipCut
from fsm.errors import SpecledgerError

SHIPPED = "shipped:"
"""How a log the package carries is named (`shipped:NAME`)."""


class SourceError(SpecledgerError):
    """A log source cannot be read (missing, unreadable, not a log of the engine)."""


# `name.N` / `name.N.gz` (numbered: a higher N is older) and `name-YYYYMMDD[.gz]` (dateext).
_NUMBERED = re.compile(r"^(?P<base>.+)\.(?P<n>\d+)$")
_DATED = re.compile(r"^(?P<base>.+)-(?P<date>\d{8}(?:\d{2})?)$")


@dataclass(frozen=True)
class LogSource:
    """One stream of log text: its files, oldest first (one for a plain file)."""

    parts: tuple[Path, ...]
    label: str | None = None

    @property
    def name(self) -> str:
        """How the import names it: its label (a shipped log's `shipped:NAME`), else the
        newest file, with the count of older parts."""
        if self.label is not None:
            return self.label
        last = str(self.parts[-1])
        older = len(self.parts) - 1
        return last if not older else f"{last} (+{older} rotated)"


def shipped_log(folder: Path, name: str) -> Path:
    """The log `shipped:NAME` names in an engine's folder of shipped logs (`NAME.log.gz`);
    an unknown name raises SourceError listing the shipped ones."""
    path = folder / f"{name.removeprefix(SHIPPED)}.log.gz"
    if not path.is_file():
        known = ", ".join(SHIPPED + p.name.removesuffix(".log.gz")
                          for p in sorted(folder.glob("*.log.gz")))
        raise SourceError(f"no shipped log '{name}' (shipped: {known})")
    return path


def _rotation(path: Path) -> tuple[str, int, int]:
    """(base name, kind, order) of a file: kind 0 for a rotated part, 1 for the live file;
    a part's order sorts oldest first."""
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    m = _NUMBERED.match(name)
    if m is not None:
        return str(path.with_name(m.group("base"))), 0, -int(m.group("n"))
    m = _DATED.match(name)
    if m is not None:
        return str(path.with_name(m.group("base"))), 0, int(m.group("date"))
    return str(path.with_name(name)), 1, 0


def expand(paths: list[Path], shipped: Callable[[str], Path] | None = None
           ) -> list[LogSource]:
    """The sources the paths name (`shipped:NAME` a log the package carries, where the
    engine ships some: `shipped` finds it): each folder's files, then files grouped into
    rotated sets. A missing path raises SourceError."""
    files: list[Path] = []
    named: list[LogSource] = []
    for p in paths:
        if str(p).startswith(SHIPPED) and shipped is not None:
            named.append(LogSource((shipped(str(p)),), str(p)))
        elif p.is_dir():
            files.extend(sorted(f for f in p.iterdir() if f.is_file()
                                and not f.name.startswith(".")))
        elif p.exists():
            files.append(p)
        else:
            raise SourceError(f"cannot read {p}: no such file or folder")
    groups: dict[str, list[Path]] = {}
    for f in files:
        groups.setdefault(_rotation(f)[0], []).append(f)
    out = named
    for members in groups.values():
        members.sort(key=lambda f: _rotation(f)[1:])
        out.append(LogSource(tuple(members)))
    return out


_BLOCK = 1 << 20  # a plain file is read a MiB at a time


class Stream:
    """A source's files as one stream of physical lines (bytes, with their newlines; a
    part that does not end in one is joined to the next as the logger wrote it), and the
    last gzip cut met (None: none)."""

    def __init__(self, parts: tuple[Path, ...]) -> None:
        self.parts = parts
        self.cut: GzipCut | None = None

    def _pieces(self, path: Path) -> Iterator[bytes]:
        try:
            with path.open("rb") as f:
                first = f.read(_BLOCK)
                if not first.startswith(GZIP_MAGIC):
                    yield first
                    while block := f.read(_BLOCK):
                        yield block
                    return
                data = first + f.read()
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None
        g = Gunzip(data)
        text = 0
        for piece in g.pieces():
            text += len(piece)
            yield piece
        if g.cut is not None and not text:
            raise SourceError(f"cannot read {path}: its gzip stream is {g.cut.why} at byte "
                              f"{g.cut.at} of {g.cut.size}, before any text")
        self.cut = g.cut or self.cut

    def lines(self) -> Iterator[bytes]:
        """Every physical line, in order."""
        rest = b""
        for part in self.parts:
            for piece in self._pieces(part):
                lines = (rest + piece).split(b"\n")
                rest = lines.pop()
                for line in lines:
                    yield line + b"\n"
        if rest:
            yield rest
