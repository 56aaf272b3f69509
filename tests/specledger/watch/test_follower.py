"""The follower reads a growing file as `tail -F` does: whole lines, through rotation,
truncation and a rewrite in place, and resumes at a cursor only in the file it names."""

import os
from pathlib import Path

from specledger.watch.follower import Chunk, LogFollower, Switch


def _text(chunks: list[Chunk]) -> bytes:
    return b"".join(c.data for c in chunks)


def _read(log: Path, data: bytes) -> LogFollower:
    """A follower of `log` that has read `data`, all of it."""
    log.write_bytes(data)
    f = LogFollower(log)
    assert _text(f.poll()) == data
    return f


def test_whole_lines_only_and_offsets(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_bytes(b"one\ntw")
    f = LogFollower(log)
    first = f.poll()
    assert _text(first) == b"one\n" and first[0].start == 0 and first[0].line == 1
    assert f.poll() == []  # the cut line waits for its newline
    with log.open("ab") as out:
        out.write(b"o\nthree\n")
    second = f.poll()
    assert _text(second) == b"two\nthree\n"
    assert (second[0].start, second[0].line) == (4, 2)
    assert f.offset == log.stat().st_size


def test_rotation_reads_on_in_the_old_file_until_a_new_one_appears(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    f = _read(log, b"a\n")
    os.rename(log, tmp_path / "s.log.1")
    with (tmp_path / "s.log.1").open("ab") as out:  # the server still writes the old file
        out.write(b"b\n")
    assert [(c.data, c.switch) for c in f.poll()] == [(b"b\n", None)]
    log.write_bytes(b"c\n")
    assert [(c.data, c.switch, c.start) for c in f.poll()] == [(b"c\n", Switch.ROTATED, 0)]


def test_rotation_drains_the_renamed_file(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    f = _read(log, b"a\n")
    with log.open("ab") as out:
        out.write(b"b\n")
    os.rename(log, tmp_path / "s.log.1")
    log.write_bytes(b"c\n")
    chunks = f.poll()
    assert [(c.data, c.switch) for c in chunks] == [(b"b\n", None), (b"c\n", Switch.ROTATED)]


def test_truncation_starts_over(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    f = _read(log, b"first line\nsecond line\n")
    log.write_bytes(b"new\n")  # same inode, shorter
    chunks = f.poll()
    assert [(c.data, c.switch, c.start) for c in chunks] == [(b"new\n", Switch.TRUNCATED, 0)]


def test_a_rewrite_past_the_old_offset_is_seen(tmp_path: Path) -> None:
    """A restarted server reopens the path with O_TRUNC and may write more than was read
    before the next poll: the bytes before the offset changed."""
    log = tmp_path / "s.log"
    f = _read(log, b"0.00.000.001 I build: old\n")
    with log.open("wb") as out:
        out.write(b"0.00.000.002 I build: new one, longer than the first\n")
    chunks = f.poll()
    assert chunks[0].switch is Switch.REWRITTEN and chunks[0].start == 0
    assert _text(chunks).startswith(b"0.00.000.002")


def test_resume_at_a_cursor_of_the_same_file(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    f = _read(log, b"a\nb\n")
    cursor = f.cursor_at(2, 2)
    f.close()
    with log.open("ab") as out:
        out.write(b"c\n")
    again = LogFollower(log, cursor)
    assert again.resumed
    chunks = again.poll()
    assert (_text(chunks), chunks[0].start, chunks[0].line) == (b"b\nc\n", 2, 2)


def test_a_cursor_of_another_file_is_not_used(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    f = _read(log, b"a\nb\n")
    cursor = f.cursor()
    f.close()
    log.unlink()
    log.write_bytes(b"x\ny\nz\n")  # a new file (new inode, other bytes) at the path
    again = LogFollower(log, cursor)
    assert not again.resumed
    assert _text(again.poll()) == b"x\ny\nz\n"


def test_a_file_that_appears_later(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    f = LogFollower(log)
    assert f.poll() == [] and f.cursor() is None
    log.write_bytes(b"a\n")
    chunks = f.poll()
    assert [(c.data, c.switch) for c in chunks] == [(b"a\n", Switch.APPEARED)]
