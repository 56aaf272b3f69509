"""The follower reads a growing file as `tail -F` does, losing nothing it could read:
whole lines, a backlog of any size a bounded piece per poll, through rotation (the old
file read to its end first, however far behind), rotations it did not see, truncation,
`copytruncate`'s copy and a rewrite in place; it resumes at a cursor only in the file it
names, found at the path or rotated beside it; and it says what it could not read."""

import os
import shutil
from dataclasses import replace
from pathlib import Path

from specledger.watch.follower import Chunk, Cursor, Gap, LogFollower, Loss, Switch

LIMIT = 16  # bytes per poll: every backlog below is many times larger


def _text(chunks: list[Chunk]) -> bytes:
    return b"".join(c.data for c in chunks)


def _read(log: Path, data: bytes) -> LogFollower:
    """A follower of `log` that has read `data`, all of it."""
    log.write_bytes(data)
    f = LogFollower(log)
    assert _text(f.poll()) == data
    return f


def _lines(tag: str, n: int) -> bytes:
    """`n` numbered lines, each longer than LIMIT's half."""
    return b"".join(b"%s line %04d\n" % (tag.encode(), i) for i in range(n))


def _drain(f: LogFollower) -> list[Chunk]:
    """Poll until a poll reads nothing; every chunk read."""
    out: list[Chunk] = []
    while chunks := f.poll():
        assert sum(len(c.data) for c in chunks) <= 2 * LIMIT  # bounded by the limit (+1 line)
        out += chunks
    return out


def _switches(chunks: list[Chunk]) -> list[Switch]:
    return [c.switch for c in chunks if c.switch is not None]


def _contiguous(chunks: list[Chunk]) -> None:
    """Each chunk starts where the one before it in the same file ended."""
    at: dict[tuple[int, int], tuple[int, int]] = {}
    for c in chunks:
        if c.switch is None and (c.dev, c.ino) in at:
            assert (c.start, c.line) == at[(c.dev, c.ino)]
        at[(c.dev, c.ino)] = (c.start + len(c.data), c.line + c.data.count(b"\n"))


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
    cursor = f.cursor()
    assert cursor is not None and (cursor.offset, cursor.line) == (log.stat().st_size, 4)


def test_a_backlog_is_read_a_bounded_piece_per_poll(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    data = _lines("a", 200)
    log.write_bytes(data)
    f = LogFollower(log, read_limit=LIMIT)
    chunks = _drain(f)
    assert len(chunks) >= len(data) // LIMIT // 2 and _text(chunks) == data
    _contiguous(chunks)


def test_a_line_longer_than_the_limit_is_read_whole(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    data = b"x" * (10 * LIMIT) + b"\nshort\n"
    log.write_bytes(data)
    f = LogFollower(log, read_limit=LIMIT)
    first = _text(f.poll())
    assert first.startswith(b"x" * (10 * LIMIT) + b"\n")
    assert first + _text(f.poll()) == data


def test_rotation_reads_on_in_the_old_file_until_a_new_one_appears(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    f = _read(log, b"a\n")
    os.rename(log, tmp_path / "s.log.1")
    with (tmp_path / "s.log.1").open("ab") as out:  # the server still writes the old file
        out.write(b"b\n")
    assert [(c.data, c.switch) for c in f.poll()] == [(b"b\n", None)]
    log.write_bytes(b"c\n")
    assert [(c.data, c.switch, c.start) for c in f.poll()] == [(b"c\n", Switch.ROTATED, 0)]


def test_rotation_drains_a_backlog_many_times_the_limit(tmp_path: Path) -> None:
    """The issue's case: six lines and more behind, the file renamed, a new one created:
    the follower used to read the old file once (one limit's worth) and move on."""
    log = tmp_path / "s.log"
    old, new = _lines("old", 100), _lines("new", 100)
    log.write_bytes(old)
    f = LogFollower(log, read_limit=LIMIT)
    first = f.poll()
    assert 0 < len(_text(first)) <= 2 * LIMIT
    os.rename(log, tmp_path / "s.log.1")
    log.write_bytes(new)
    chunks = first + _drain(f)
    assert _text(chunks) == old + new
    assert _switches(chunks) == [Switch.ROTATED]
    assert next(c for c in chunks if c.switch).start == 0
    _contiguous(chunks)
    assert f.gaps == []


def test_each_file_met_while_behind_is_read_in_turn(tmp_path: Path) -> None:
    """Rotated twice while the first file is still being read: the second file, seen at
    the path once, is held open, and read after the first even though it was renamed."""
    log = tmp_path / "s.log"
    a, b, c = _lines("a", 60), _lines("b", 60), _lines("c", 60)
    log.write_bytes(a)
    f = LogFollower(log, read_limit=LIMIT)
    chunks = f.poll()
    os.rename(log, tmp_path / "s.log.1")
    log.write_bytes(b)
    chunks += f.poll()  # sees b at the path, reads on in a
    os.rename(tmp_path / "s.log.1", tmp_path / "s.log.2")
    os.rename(log, tmp_path / "s.log.1")
    log.write_bytes(c)
    chunks += _drain(f)
    assert _text(chunks) == a + b + c
    assert _switches(chunks) == [Switch.ROTATED, Switch.ROTATED]


def _behind_a_rotation(tmp_path: Path) -> tuple[LogFollower, list[Chunk], bytes, bytes]:
    """A follower behind on `a`, with `b`, the file now at the path, waiting its turn."""
    log = tmp_path / "s.log"
    a, b = _lines("a", 60), _lines("b", 60)
    log.write_bytes(a)
    f = LogFollower(log, read_limit=LIMIT)
    chunks = f.poll()
    os.rename(log, tmp_path / "s.log.1")
    log.write_bytes(b)
    chunks += f.poll()
    return f, chunks, a, b


def test_a_file_restarted_in_place_before_its_turn_says_what_was_lost(
        tmp_path: Path) -> None:
    f, chunks, a, b = _behind_a_rotation(tmp_path)
    c = _lines("c", 80)
    (tmp_path / "s.log").write_bytes(c)  # O_TRUNC and more: b's bytes are gone
    chunks += _drain(f)
    assert _text(chunks) == a + c
    assert _switches(chunks) == [Switch.REWRITTEN]
    assert [(g.offset, g.lost, g.why) for g in f.gaps] == [(0, len(b), Loss.TRUNCATED)]


def test_a_file_copied_and_truncated_before_its_turn_is_read_from_the_copy(
        tmp_path: Path) -> None:
    f, chunks, a, b = _behind_a_rotation(tmp_path)
    log = tmp_path / "s.log"
    shutil.copyfile(log, tmp_path / "s.log.copy")
    with log.open("r+b") as out:
        out.truncate(0)
        out.write(b"c\n")
    chunks += _drain(f)
    assert _text(chunks) == a + b + b"c\n"
    assert _switches(chunks) == [Switch.ROTATED, Switch.TRUNCATED]
    assert f.gaps == []


def _logrotate(log: Path, data: bytes, mtime: float) -> None:
    """Shift `log`'s numbered copies up by one, rename it to `.1`, write `data` to a new
    file at the path, dated `mtime`."""
    copies = sorted((p for p in log.parent.glob(log.name + ".*") if p.suffix[1:].isdigit()),
                    key=lambda p: -int(p.suffix[1:]))
    for p in copies:
        p.rename(log.with_name(f"{log.name}.{int(p.suffix[1:]) + 1}"))
    log.rename(log.with_name(log.name + ".1"))
    log.write_bytes(data)
    os.utime(log, (mtime, mtime))


def test_rotations_between_two_polls_are_found_beside_the_path(tmp_path: Path) -> None:
    """Three rotations before the next poll: the files that came and went unseen are
    read from where they now lie, in the order they were written, the old archives and
    compressed ones left alone."""
    log = tmp_path / "s.log"
    t0 = 1_700_000_000.0
    (tmp_path / "s.log.7").write_bytes(b"an old archive\n")
    os.utime(tmp_path / "s.log.7", (t0 - 3600, t0 - 3600))
    parts = [_lines(tag, 40) for tag in "abcd"]
    log.write_bytes(parts[0])
    os.utime(log, (t0, t0))
    f = LogFollower(log, read_limit=LIMIT)
    chunks = f.poll()
    for i, part in enumerate(parts[1:], 1):
        _logrotate(log, part, t0 + i)
    (tmp_path / "s.log.2.gz").write_bytes(b"\x1f\x8b compressed")
    os.utime(tmp_path / "s.log.2.gz", (t0 + 1, t0 + 1))
    chunks += _drain(f)
    assert _text(chunks) == b"".join(parts)
    assert _switches(chunks) == [Switch.ROTATED] * 3
    assert f.gaps == []


def test_truncation_starts_over(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    f = _read(log, b"first line\nsecond line\n")
    log.write_bytes(b"new\n")  # same inode, shorter
    chunks = f.poll()
    assert [(c.data, c.switch, c.start) for c in chunks] == [(b"new\n", Switch.TRUNCATED, 0)]
    assert f.gaps == []  # everything before the truncation had been read


def test_a_truncation_before_the_backlog_is_read_says_how_much_was_lost(
        tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    old = _lines("old", 100)
    log.write_bytes(old)
    f = LogFollower(log, read_limit=LIMIT)
    first = f.poll()
    read = len(_text(first))
    with log.open("r+b") as out:  # same inode, emptied, and one short line written
        out.truncate(0)
        out.write(b"new\n")
    chunks = _drain(f)
    assert _text(chunks) == b"new\n" and _switches(chunks) == [Switch.TRUNCATED]
    ino = log.stat().st_ino
    assert [(g.ino, g.offset, g.lost, g.why) for g in f.gaps] == [
        (ino, read, len(old) - read, Loss.TRUNCATED)]
    assert f"lost {len(old) - read} byte(s) from byte {read}" in f.gaps[0].text(log)


def test_copytruncate_is_read_on_in_the_copy(tmp_path: Path) -> None:
    """logrotate's copytruncate: the file is copied, then truncated in place. What was
    not read yet is read from the copy, then the file from its start."""
    log = tmp_path / "s.log"
    old, more, new = _lines("old", 100), _lines("more", 20), b"n\n"  # shorter: truncated
    log.write_bytes(old)
    f = LogFollower(log, read_limit=LIMIT)
    chunks = f.poll()
    with log.open("ab") as out:
        out.write(more)  # written after the poll, before the copy
    shutil.copyfile(log, tmp_path / "s.log.1")
    with log.open("r+b") as out:
        out.truncate(0)
    with log.open("ab") as out:
        out.write(new)
    chunks += _drain(f)
    assert _text(chunks) == old + more + new
    assert _switches(chunks) == [Switch.TRUNCATED]
    ino = log.stat().st_ino
    assert {(c.dev, c.ino) for c in chunks} == {(log.stat().st_dev, ino)}  # one file's bytes
    _contiguous(chunks)
    assert f.gaps == []


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


def test_a_restart_in_place_behind_a_backlog_says_how_much_was_lost(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    old = _lines("old", 100)
    log.write_bytes(old)
    f = LogFollower(log, read_limit=LIMIT)
    read = len(_text(f.poll()))
    restarted = _lines("restarted", 200)  # O_TRUNC, then more than was read
    with log.open("wb") as out:
        out.write(restarted)
    chunks = _drain(f)
    assert _text(chunks) == restarted and _switches(chunks) == [Switch.REWRITTEN]
    assert [(g.offset, g.lost, g.why) for g in f.gaps] == [
        (read, len(old) - read, Loss.TRUNCATED)]


def test_a_rotated_file_s_cut_last_line_is_read(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_bytes(b"whole\ncut sho")
    f = LogFollower(log)
    assert _text(f.poll()) == b"whole\n"
    os.rename(log, tmp_path / "s.log.1")
    log.write_bytes(b"next\n")
    chunks = f.poll()
    assert [(c.data, c.switch) for c in chunks] == [(b"cut sho\n", None),
                                                    (b"next\n", Switch.ROTATED)]


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
    assert again.gaps == []


def _stopped(log: Path, data: bytes, limit: int) -> Cursor:
    """Where a follower of `log` holding `data` stopped after one poll of `limit` bytes."""
    log.write_bytes(data)
    f = LogFollower(log, read_limit=limit)
    f.poll()
    cursor = f.cursor()
    f.close()
    assert cursor is not None and 0 < cursor.offset < len(data)
    return cursor


def test_a_cursor_naming_another_file_is_not_used(tmp_path: Path) -> None:
    """The identity is checked on its own (the bytes before the offset are the same)."""
    log = tmp_path / "s.log"
    data = _lines("a", 20)
    cursor = _stopped(log, data, LIMIT)
    other = replace(cursor, ino=cursor.ino + 1)
    again = LogFollower(log, other, read_limit=LIMIT)
    assert not again.resumed
    assert _text(_drain(again)) == data  # from the start
    assert again.gaps == [Gap(other.dev, other.ino, other.offset, other.line, None, Loss.GONE)]


def test_a_cursor_whose_bytes_changed_is_not_used(tmp_path: Path) -> None:
    """The same file (same inode, same size), rewritten in place while no watch ran: the
    bytes before the offset are checked on their own."""
    log = tmp_path / "s.log"
    data = _lines("a", 20)
    cursor = _stopped(log, data, LIMIT)
    changed = data.replace(b"a line", b"b line")
    with log.open("r+b") as out:
        out.write(changed)
    assert (log.stat().st_ino, log.stat().st_size) == (cursor.ino, len(data))
    again = LogFollower(log, cursor, read_limit=LIMIT)
    assert not again.resumed
    assert _text(_drain(again)) == changed
    assert [(g.offset, g.lost, g.why) for g in again.gaps] == [
        (cursor.offset, None, Loss.REPLACED)]


def test_a_cursor_past_the_end_is_not_used(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    data = _lines("a", 20)
    cursor = _stopped(log, data, 4 * LIMIT)
    with log.open("r+b") as out:
        out.truncate(cursor.offset - 1)
    again = LogFollower(log, cursor)
    assert not again.resumed and [g.why for g in again.gaps] == [Loss.REPLACED]


def test_resume_in_the_file_rotated_while_no_watch_ran(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    data, later, new = _lines("a", 50), _lines("later", 10), _lines("new", 20)
    cursor = _stopped(log, data, LIMIT)
    with log.open("ab") as out:
        out.write(later)
    _logrotate(log, new, log.stat().st_mtime + 1)
    again = LogFollower(log, cursor, read_limit=LIMIT)
    assert again.resumed
    chunks = _drain(again)
    assert _text(chunks) == (data + later)[cursor.offset:] + new
    assert chunks[0].start == cursor.offset and _switches(chunks) == [Switch.ROTATED]
    assert again.gaps == []


def test_resume_in_the_copy_of_a_file_truncated_while_no_watch_ran(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    data, new = _lines("a", 50), _lines("new", 20)
    cursor = _stopped(log, data, LIMIT)
    shutil.copyfile(log, tmp_path / "s.log.1")
    with log.open("r+b") as out:
        out.truncate(0)
        out.write(new)
    again = LogFollower(log, cursor, read_limit=LIMIT)
    assert again.resumed
    chunks = _drain(again)
    assert _text(chunks) == data[cursor.offset:] + new
    assert _switches(chunks) == [Switch.TRUNCATED] and again.gaps == []


def test_a_cursor_whose_file_is_gone_says_so(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    cursor = _stopped(log, _lines("a", 50), LIMIT)
    (tmp_path / "new").write_bytes(b"new\n")
    os.replace(tmp_path / "new", log)  # the old file is deleted as the new one takes its name
    again = LogFollower(log, cursor)
    assert not again.resumed
    assert [(c.data, c.switch) for c in again.poll()] == [(b"new\n", Switch.ROTATED)]
    assert [(g.ino, g.offset, g.why) for g in again.gaps] == [
        (cursor.ino, cursor.offset, Loss.GONE)]
    assert "no longer at the path" in again.gaps[0].text(log)


def test_a_file_that_appears_later(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    f = LogFollower(log)
    assert f.poll() == [] and f.cursor() is None
    log.write_bytes(b"a\n")
    chunks = f.poll()
    assert [(c.data, c.switch) for c in chunks] == [(b"a\n", Switch.APPEARED)]
