"""The llama-server log reader on logs captured from the real server (fixtures/README.md):
every line counted once, no unknown line in any of them, the server's facts, the same
records without the logger's prefix, and one-line refusals of what is not a log."""

import gzip
import re
from collections import Counter
from pathlib import Path

import pytest

from adapters.llama.log.reader import LogFormatError, parse_log
from adapters.llama.log.records import Candidate, Compute, RecordKind, StopReason
from adapters.llama.log.sources import read_log

FIXTURES = Path(__file__).parents[1] / "fixtures"
NAMES = ("mtp", "ngram-mod", "draft-simple", "two-slots", "quiet", "chain-sampled", "plain",
         "quiet-lv4")
K = RecordKind


def fixture_text(name: str) -> str:
    """A fixture log's text."""
    return gzip.decompress((FIXTURES / f"{name}.log.gz").read_bytes()).decode(
        errors="surrogateescape")


def with_number(text: str, pattern: str, by: int) -> tuple[str, re.Match[str]]:
    """`text` with the number in `pattern`'s first group, where it first matches, moved
    by `by` (a log that says one thing differently), and that match in the text as it was."""
    m = re.search(pattern, text)
    assert m is not None, pattern
    return text[:m.start(1)] + str(int(m.group(1)) + by) + text[m.end(1):], m


@pytest.mark.parametrize("name", NAMES)
def test_every_line_counted_once_and_none_unknown(name: str) -> None:
    reading = read_log(FIXTURES / f"{name}.log.gz")
    assert reading.lines == fixture_text(name).count("\n")
    assert reading.parsed + reading.skipped + reading.unknown == reading.lines
    assert reading.unknown == 0, reading.unknown_examples
    assert reading.partial_line is None
    assert reading.server.n_slots == (2 if name == "two-slots" else 1)


def test_server_facts_name_the_drafter_and_its_rollback() -> None:
    mtp = read_log(FIXTURES / "mtp.log.gz").server
    assert mtp.spec_types == ["draft-mtp"] and mtp.draft_n_max == 4
    assert not mtp.spec_checkpoints and mtp.n_rs_seq == 4 and mtp.verbose
    ngram = read_log(FIXTURES / "ngram-mod.log.gz").server
    assert ngram.spec_types == ["ngram-mod"] and ngram.spec_checkpoints
    simple = read_log(FIXTURES / "draft-simple.log.gz").server
    assert simple.spec_types == ["draft-simple"] and simple.draft_model is not None
    quiet = read_log(FIXTURES / "quiet.log.gz").server
    # Without -v only the MTP context's creation names the type.
    assert quiet.spec_types == ["draft-mtp"] and quiet.verbose is False
    assert quiet.implementations == [] and quiet.verbosity == 3
    chain = read_log(FIXTURES / "chain-sampled.log.gz").server
    # Started with --spec-type ngram-mod,draft-mtp; set up in llama.cpp's own order.
    assert chain.spec_types == ["ngram-mod", "draft-mtp"]
    assert mtp.build is not None and re.match(r"build \d+ \(\w+\)", mtp.build)


def test_records_match_the_raw_lines() -> None:
    text = fixture_text("draft-simple")
    kinds = Counter(r.kind for r in parse_log(text).records)
    assert kinds[K.DRAFT] == text.count("generate_draft:")
    assert kinds[K.TOKEN] == len(re.findall(r"next token:", text))
    assert kinds[K.SPEC_RESTORED] == text.count("restoring speculative checkpoint")
    assert kinds[K.VERDICT] == len(re.findall(r"accepted\s+\d+/\s*\d+ draft tokens(?!,)", text))
    restored = [r for r in parse_log(text).records if r.kind is K.VERDICT and r.restore]
    assert len(restored) == text.count("(restore checkpoint)") > 0
    assert kinds[K.CANDIDATE] == text.count("draft candidate")


def test_candidates_with_a_newline_piece_fold_their_continuation() -> None:
    text = fixture_text("two-slots")
    newline = [r for r in parse_log(text).records
               if isinstance(r, Candidate) and r.token == 10]
    assert newline  # the byte tokenizer's "\n" splits those lines in two
    assert parse_log(text).unknown == 0


def test_without_prefix_the_same_records() -> None:
    text = fixture_text("ngram-mod")
    bare = "\n".join(re.sub(r"^\d+\.\d{2}\.\d{3}\.\d{3} [DIWE] ", "", ln)
                     for ln in text.split("\n"))
    with_prefix, without = parse_log(text), parse_log(bare)
    assert [(r.kind, r.slot, r.task) for r in without.records] == [
        (r.kind, r.slot, r.task) for r in with_prefix.records]
    assert all(r.t is None for r in without.records)
    assert all(r.t is not None for r in with_prefix.records)


def test_stop_reasons() -> None:
    records = read_log(FIXTURES / "two-slots.log.gz").records
    reasons = [r.reason for r in records if r.kind is K.STOPPED]  # type: ignore[attr-defined]
    assert set(reasons) <= set(StopReason) and StopReason.LIMIT in reasons


def test_an_unknown_slot_line_is_counted_not_fatal() -> None:
    text = fixture_text("mtp")
    line = "0.00.100.000 I slot   operator(): id  0 | task 0 | a message no pattern knows\n"
    reading = parse_log(text + line)
    assert reading.unknown == 1 and "a message no pattern knows" in reading.unknown_examples[0]
    assert len(reading.records) == len(parse_log(text).records)


def test_a_cut_last_line_is_dropped_and_reported() -> None:
    text = fixture_text("mtp")
    cut = text[: text.rindex("stop processing") + 10]
    reading = parse_log(cut)
    assert reading.partial_line == cut.count("\n") + 1
    assert K.RELEASED not in {r.kind for r in reading.records[-3:]}


def test_an_empty_file_has_no_line(tmp_path: Path) -> None:
    for name, data in (("empty.log", b""), ("empty.log.gz", gzip.compress(b""))):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(LogFormatError, match=r"is empty \(0 lines\)") as info:
            read_log(tmp_path / name)
        assert "1 line" not in str(info.value)
    assert parse_log(fixture_text("mtp") + "\n").lines == fixture_text("mtp").count("\n") + 1


@pytest.mark.parametrize("keep", [0.75, 0.95])
def test_a_cut_gzip_is_read_as_far_as_it_goes(tmp_path: Path, keep: float) -> None:
    data = (FIXTURES / "ngram-mod.log.gz").read_bytes()
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(data[:int(len(data) * keep)])
    reading = read_log(cut)
    whole = read_log(FIXTURES / "ngram-mod.log.gz")
    assert reading.gzip_cut is not None and reading.gzip_cut.why == "ends early"
    assert reading.gzip_cut.at == reading.gzip_cut.size == int(len(data) * keep)
    text = fixture_text("ngram-mod").encode(errors="surrogateescape")
    assert 0 < reading.gzip_cut.text_bytes < len(text)
    # Every whole line before the cut is read as the whole file's are; the cut one dropped.
    assert reading.partial_line == reading.lines > 1
    assert reading.records == whole.records[:len(reading.records)]
    assert len(reading.records) > 10
    assert whole.gzip_cut is None


def test_a_gzip_corrupt_midway_keeps_what_came_before(tmp_path: Path) -> None:
    data = bytearray(gzip.compress(fixture_text("mtp").encode(errors="surrogateescape")))
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(64)  # zeroed in the middle of the deflate stream
    bad = tmp_path / "bad.log.gz"
    bad.write_bytes(bytes(data))
    reading = read_log(bad)
    # Deflate notices damage late (at the latest by the checksum): reported, not refused.
    assert reading.gzip_cut is not None and reading.gzip_cut.why == "corrupt"
    assert middle <= reading.gzip_cut.at <= reading.gzip_cut.size == len(data)
    assert reading.server.build is not None  # the text before the damage


@pytest.mark.parametrize("content", ["", '{"choices": []}\n', "# a README\n\nsome prose\n"])
def test_non_log_text_is_refused_in_one_line(content: str) -> None:
    with pytest.raises(LogFormatError, match="is not a llama-server log") as info:
        parse_log(content, "x.txt")
    assert "\n" not in str(info.value)


def test_binary_and_missing_files_are_refused(tmp_path: Path) -> None:
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\x00\x01\x02slot")
    with pytest.raises(LogFormatError, match="binary"):
        read_log(blob)
    with pytest.raises(LogFormatError, match="cannot read"):
        read_log(tmp_path / "absent.log")
    bad_gz = tmp_path / "bad.log.gz"
    bad_gz.write_bytes(b"\x1f\x8b" + b"junk")
    with pytest.raises(LogFormatError, match="cannot read"):
        read_log(bad_gz)


def test_a_compute_bracket_is_chained_only_right_after_another() -> None:
    # a forward's bracket follows its decode call; the drafter's pass follows the forward's
    # bracket with nothing between; a prompt's second chunk has a decode call of its own
    lines = ["srv        decode: n_batch (effective) = 2048, off = 0",
             "que  yield_to_que: yielding to queue", "que  yield_to_que: done yielding to queue",
             "que  yield_to_que: yielding to queue", "que  yield_to_que: done yielding to queue",
             "srv        decode: n_batch (effective) = 2048, off = 2048",
             "que  yield_to_que: yielding to queue", "que  yield_to_que: done yielding to queue"]
    text = "".join(f"0.00.{100 + i:03d}.000 D {line}\n" for i, line in enumerate(lines))
    reading = parse_log(text)
    brackets = [r for r in reading.records if isinstance(r, Compute)]
    assert [(r.t_begin, r.t, r.chained) for r in brackets] == [
        (0.101, 0.102, False), (0.103, 0.104, True), (0.106, 0.107, False)]
    assert reading.parsed == 6 and reading.skipped == 2


@pytest.mark.parametrize("log", ["0.3.21/ngram-mod", "0.3.24/mtp", "0.3.30/mtp", "0.3.36/mtp"])
def test_a_drafters_statistics_carry_its_draft_calls_milliseconds(log: str) -> None:
    # `dur(b,g,a) = b, g, a ms` closes the line; 0.3.36 prints its acceptance by position
    # before it
    text = gzip.decompress((FIXTURES / "builds" / f"{log}.log.gz").read_bytes()).decode(
        errors="replace")
    printed = [float(g) for g in re.findall(r"dur\(b,g,a\) = [\d.]+, ([\d.]+),", text)]
    stats = [r for r in read_log(FIXTURES / "builds" / f"{log}.log.gz").records
             if r.kind is RecordKind.SPEC_STATS]
    assert printed and [getattr(r, "draft_ms", None) for r in stats] == printed
