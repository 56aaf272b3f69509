"""Compressed logs as rotation leaves them: a gzip file read as far as it goes. A stream
that ends early (a file still being written, or cut) or turns corrupt keeps the text before
the cut, and says where, as the lines of a plain log cut mid-write are kept."""

import zlib
from collections.abc import Iterator
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


class Gunzip:
    """The text of gzip `data` (every member, as `gzip.decompress` reads them), piece by
    piece (`pieces`); once they are read, `cut` says where the stream ended before its end
    marker or turned corrupt (None: it did neither): the text up to there is kept, as the
    lines of a plain log cut mid-write are."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.cut: GzipCut | None = None

    def pieces(self) -> Iterator[bytes]:
        """The decompressed text, a piece at a time."""
        data, text_bytes, pos = self.data, 0, 0
        while pos < len(data):
            if not data.startswith(GZIP_MAGIC, pos):
                if data[pos:].strip(b"\x00"):  # zero padding after the last member is fine
                    self.cut = GzipCut(pos, len(data), text_bytes, "corrupt")
                return
            z = zlib.decompressobj(16 + zlib.MAX_WBITS)
            while not z.eof and pos < len(data):
                chunk = data[pos:pos + _CHUNK]
                try:
                    piece = z.decompress(chunk)
                except zlib.error:
                    self.cut = GzipCut(pos, len(data), text_bytes, "corrupt")
                    return
                text_bytes += len(piece)
                pos += len(chunk) - len(z.unused_data)
                yield piece
            if not z.eof:
                piece = z.flush()
                text_bytes += len(piece)
                self.cut = GzipCut(pos, len(data), text_bytes, "ends early")
                yield piece
                return
