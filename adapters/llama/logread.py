"""Read a llama-server log into typed records: `read_log(path)` / `parse_log(text)`.

Lines may carry the logger's prefix (`M.ss.mmm.uuu L `, the timestamp and the level
letter; either may be off) or not; a token whose text holds a newline continues its line
on the next physical line(s), which are folded back, and a task's sampler parameters
follow their line as tab-indented lines, read into it. Every line is counted once as
parsed (it became a record or a server fact), skipped (a known line the ledger does not
use) or unknown (a slot line no pattern matches: a format this reader does not know).
A file whose last line has no newline was cut while being written: that partial line is
dropped and reported. A gzip file whose stream ends early (or turns corrupt) was cut too:
the text before the cut is read and where it ends reported, as for a plain log. Text with
no llama-server line at all is refused in one line. The source digest is of the text as
read (after gzip decompression).
"""

import hashlib
import re
import zlib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from adapters.llama.errors import LlamaError
from adapters.llama.logpatterns import (
    ComputeMark,
    compute_mark,
    is_slot_noise,
    opens_piece,
    sampler_params,
    slot_record,
    spec_record,
)
from adapters.llama.logrecords import Compute, Record, RecordKind, SamplerParams
from adapters.llama.serverfacts import ServerInfo, server_fact

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PREFIX = re.compile(r"^(?:(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) )?(?:([DIWE]) )?")
_SLOT = re.compile(r"^slot\s+[^:|]+:\s+id\s+(\d+)\s+\|\s+task\s+(-?\d+)\s+\|\s?(.*)$")
# A speculative line: `spec <func>: ` (0.3.36), else `<func>: ` or bare (older builds' LOG_DBG).
_SPEC = re.compile(r"^(?:spec\s+[^:]+:\s|[\w:~]+: )?(.*)$")
_SERVER = re.compile(r"^(?:srv|cmn|spec|que|res|main)\s+\S+|^(?:llama_|common_|main:)")
_MAX_CONTINUATION = 8
_TIMING_KINDS = (RecordKind.TIMING, RecordKind.DRAFT_TOTALS)
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_CHUNK = 1 << 12  # fed to zlib piecewise, so a corrupt stream keeps what came before


class LogFormatError(LlamaError):
    """The input is not a llama-server log (or cannot be read as text)."""


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


@dataclass
class LogReading:
    """A parsed log: records in line order, the server's facts, and how every line was
    counted. `partial_line` is the 1-based number of a last line cut mid-write (dropped),
    else None; `gzip_cut` says where a gzip stream that ends early was cut, else None."""

    records: list[Record]
    server: ServerInfo
    lines: int = 0
    parsed: int = 0
    skipped: int = 0
    unknown: int = 0
    unknown_examples: list[str] = field(default_factory=list)
    partial_line: int | None = None
    gzip_cut: GzipCut | None = None
    sha256: str = ""


def _prefix_time(m: re.Match[str]) -> float | None:
    if m.group(1) is None:
        return None
    minutes, sec, ms, us = (int(m.group(i)) for i in range(1, 5))
    return minutes * 60 + sec + ms / 1e3 + us / 1e6


def line_time(line: str) -> float | None:
    """The seconds a line's `M.ss.mmm.uuu` prefix gives (None: the line has none)."""
    prefix = _PREFIX.match(line)
    return None if prefix is None else _prefix_time(prefix)


def parse_log(text: str, name: str = "input") -> LogReading:
    """Parse a whole log held in `text` (`name` is what errors call it)."""
    if "\x00" in text:
        raise LogFormatError(f"{name} is binary, not a llama-server log (pass the text file "
                             "the server's stdout/stderr went to)")
    if not text:
        raise LogFormatError(f"{name} is not a llama-server log: it is empty (0 lines)")
    physical = text.split("\n")
    complete = text.endswith("\n")
    if complete:
        physical.pop()  # the empty string after the final newline
    out = LogReading(records=[], server=ServerInfo(), lines=len(physical),
                     sha256=hashlib.sha256(text.encode(errors="surrogateescape")).hexdigest())
    if not complete and physical:
        out.partial_line = len(physical)
        physical.pop()
        out.skipped += 1
    llama_lines = 0
    continuation = 0
    params: SamplerParams | None = None  # a `sampler params:` line, its values to come
    params_lines: list[str] = []
    # Before 0.3.24 print_timing is one slot message of several lines (its first empty):
    # the lines after it are that slot's, without the slot prefix.
    timing_ctx: dict[str, int | float | None] | None = None
    compute: tuple[float | None, bool] | None = None  # an open bracket: start, chained
    call_line = 0  # the last decode call's line
    for number, raw in enumerate(physical, 1):
        line = _ANSI.sub("", raw).rstrip("\r")
        prefix = _PREFIX.match(line)
        body = line[prefix.end():]
        has_prefix = prefix.end() > 0
        if params is not None:
            if not has_prefix and body.startswith("\t"):
                params_lines.append(body)
                out.parsed += 1
                continue
            out.records.append(replace(params, params=sampler_params(params_lines)))
            params = None
        if continuation and not has_prefix:
            continuation = 0 if body.endswith("'") else continuation - 1
            out.skipped += 1
            continue
        continuation = 0
        t = _prefix_time(prefix)
        slot_m = _SLOT.match(body)
        if slot_m is not None:
            llama_lines += 1
            message = slot_m.group(3)
            ctx = {"line": number, "t": t, "slot": int(slot_m.group(1)),
                   "task": int(slot_m.group(2))}
            timing_ctx = ctx if not message.strip() else None
            record = slot_record(message, ctx)
            if isinstance(record, SamplerParams):
                params, params_lines = record, []
                out.parsed += 1
            elif record is not None:
                out.records.append(record)
                out.parsed += 1
                continuation = _MAX_CONTINUATION if opens_piece(message) else 0
            elif is_slot_noise(message):
                out.skipped += 1
            else:
                out.unknown += 1
                if len(out.unknown_examples) < 5:
                    out.unknown_examples.append(f"{number}: {message[:120]}")
            continue
        if timing_ctx is not None and not has_prefix:
            record = slot_record(body, {**timing_ctx, "line": number})
            if record is not None and record.kind in _TIMING_KINDS:
                out.records.append(record)
                out.parsed += 1
                continue
        mark = compute_mark(body)
        if mark is ComputeMark.CALL:
            call_line = number  # a forward of its own follows: its bracket is not chained
        elif mark is not None:
            llama_lines += 1
            out.parsed += 1
            if mark is ComputeMark.BEGIN:
                last = out.records[-1] if out.records else None
                compute = (t, last is not None and last.kind is RecordKind.COMPUTE
                           and last.line > call_line)
            elif compute is not None:
                out.records.append(Compute(kind=RecordKind.COMPUTE, line=number, t=t,
                                           slot=None, task=None, t_begin=compute[0],
                                           chained=compute[1]))
                compute = None
            continue
        spec_m = _SPEC.match(body)
        assert spec_m is not None  # every part of it is optional
        record = spec_record(spec_m.group(1), number, t)
        if record is not None:
            out.records.append(record)
            out.parsed += 1
            continuation = _MAX_CONTINUATION if opens_piece(spec_m.group(1)) else 0
            llama_lines += 1
            continue
        if server_fact(body, out.server):
            out.parsed += 1
        else:
            out.skipped += 1
        llama_lines += bool(has_prefix or _SERVER.match(body))
    if params is not None:
        out.records.append(replace(params, params=sampler_params(params_lines)))
    if not llama_lines:
        raise LogFormatError(f"{name} is not a llama-server log: none of its {out.lines} "
                             "line(s) has the shape of a server, slot or model-loader line")
    return out


def gunzip(data: bytes) -> tuple[bytes, GzipCut | None]:
    """The text of gzip `data` (every member, as `gzip.decompress` reads them) and, when
    the stream ends before its end marker or turns corrupt, where: the text up to there
    is kept, as the lines of a plain log cut mid-write are."""
    out: list[bytes] = []
    text_bytes, pos = 0, 0
    while pos < len(data):
        if not data.startswith(_GZIP_MAGIC, pos):
            if not data[pos:].strip(b"\x00"):
                break  # zero padding after the last member, which gzip tolerates too
            return b"".join(out), GzipCut(pos, len(data), text_bytes, "corrupt")
        z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while not z.eof and pos < len(data):
            chunk = data[pos:pos + _GZIP_CHUNK]
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


def read_log(path: str | Path) -> LogReading:
    """Parse the log file at `path` (plain, or gzip-compressed as rotated logs are; a cut
    gzip file is read as far as it goes); unreadable or non-log files raise
    LogFormatError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LogFormatError(f"cannot read {path}: {exc.strerror or exc}") from None
    cut = None
    if data.startswith(_GZIP_MAGIC):
        data, cut = gunzip(data)
        if cut is not None and not data:
            raise LogFormatError(f"cannot read {path}: its gzip stream is {cut.why} at byte "
                                 f"{cut.at} of {cut.size}, before any text")
    # Byte-level tokens print raw bytes: a lone byte of a UTF-8 sequence is no error.
    reading = parse_log(data.decode("utf-8", errors="surrogateescape"), str(path))
    reading.gzip_cut = cut
    return reading
