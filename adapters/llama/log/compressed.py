"""Compressed logs as rotation leaves them: a gzip file read as far as it goes. A stream
that ends early (a file still being written, or cut) or turns corrupt keeps the text before
the cut, and says where, as the lines of a plain log cut mid-write are kept."""

import zlib
from dataclasses import asdict, dataclass

GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 12  # fed to zlib piecewise, so a corrupt stream keeps what came before


@dataclass(frozen=True)
class GzipCut:
    """A gzip file read as far as it goes: its stream stops at compressed byte `at` of
    `size` (`why`: it ends early, or is corrupt there), after `text_bytes` bytes of text."""

    at: int
    size: int
    text_bytes: int
    why: str

    def to_dict(self) -> dict[str, int | str]:
        """JSON form (the stored provenance)."""
        return asdict(self)


def gunzip(data: bytes) -> tuple[bytes, GzipCut | None]:
    """The text of gzip `data` (every member, as `gzip.decompress` reads them) and, when
    the stream ends before its end marker or turns corrupt, where: the text up to there
    is kept, as the lines of a plain log cut mid-write are."""
    out: list[bytes] = []
    text_bytes, pos = 0, 0
    while pos < len(data):
        if not data.startswith(GZIP_MAGIC, pos):
            if not data[pos:].strip(b"\x00"):
                break  # zero padding after the last member, which gzip tolerates too
            return b"".join(out), GzipCut(pos, len(data), text_bytes, "corrupt")
        z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while not z.eof and pos < len(data):
            chunk = data[pos:pos + _CHUNK]
            try:
                piece = z.decompress(chunk)
            except zlib.error:
                return b"".join(out), GzipCut(pos, len(data), text_bytes, "corrupt")
            out.append(piece)
            text_bytes += len(piece)
            pos += len(chunk) - len(z.unused_data)
        if not z.eof:
            out.append(z.flush())
            text_bytes += len(out[-1])
            return b"".join(out), GzipCut(pos, len(data), text_bytes, "ends early")
    return b"".join(out), None
