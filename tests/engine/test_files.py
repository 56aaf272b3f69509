"""engine/files.py: a file a command writes is replaced whole or not at all, only where a
regular file (or nothing) was, and a failed write leaves no trace."""

import errno
import os
import stat
from pathlib import Path

import pytest

from engine import files
from engine.files import OutputPathError, OutputWriteError, replacing, write_file


def leftovers(folder: Path) -> list[str]:
    """Temporary files of `replacing` left in `folder`."""
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".partial"))


def test_a_new_file_and_its_missing_folders_are_created(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "x.txt"
    assert write_file(out, "hello") == out
    assert out.read_text() == "hello" and leftovers(out.parent) == []
    mode = stat.S_IMODE(out.stat().st_mode)
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask  # what a plain open would have given


def test_an_existing_file_is_replaced_and_keeps_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "x.txt"
    out.write_text("old")
    out.chmod(0o640)
    write_file(out, b"new")
    assert out.read_bytes() == b"new" and stat.S_IMODE(out.stat().st_mode) == 0o640


def test_a_symlink_to_a_file_is_followed_and_kept(tmp_path: Path) -> None:
    real, link = tmp_path / "real.txt", tmp_path / "link.txt"
    real.write_text("old")
    link.symlink_to(real)
    write_file(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _link_to_null(tmp_path: Path) -> Path:
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    return link


def _loop(tmp_path: Path) -> Path:
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    return a


def _under_a_file(tmp_path: Path) -> Path:
    (tmp_path / "plain").write_text("x")
    return tmp_path / "plain" / "x.txt"


@pytest.mark.parametrize(("make", "said"), [
    (lambda d: d, "it is a directory"),
    (_fifo, "it is a fifo"),
    (_link_to_null, r"/dev/null \(.*null links to it\): it is a character device"),
    (_loop, "symlinks form a loop"),
    (_under_a_file, "a folder on its path is a file"),
], ids=["directory", "fifo", "symlink-to-device", "symlink-loop", "under-a-file"])
def test_anything_but_a_regular_file_is_refused_before_writing(
        tmp_path: Path, make: object, said: str) -> None:
    target = make(tmp_path)  # type: ignore[operator]
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(OutputPathError, match=said), replacing(target):
        pytest.fail("the body must not run")
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"),
                                     KeyboardInterrupt(), ValueError("writer's bug")],
                         ids=["disk-full", "interrupt", "writer-error"])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(
        tmp_path: Path, failure: BaseException) -> None:
    out = tmp_path / "x.txt"
    out.write_text("old")
    expected = OutputWriteError if isinstance(failure, OSError) else type(failure)
    with pytest.raises(expected), replacing(out) as tmp:
        tmp.write_text("half of the n")
        raise failure
    assert out.read_text() == "old" and leftovers(tmp_path) == []


def test_a_failed_write_removes_the_folders_it_created(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def full(_: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files, "_sync", full)  # a full disk that shows at the flush
    with pytest.raises(OutputWriteError, match=r"No space left on device \(nothing was written"):
        write_file(tmp_path / "new" / "deeper" / "x.txt", "data")
    assert os.listdir(tmp_path) == []


def test_a_target_that_became_a_directory_while_writing_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "x.txt"
    with pytest.raises(OutputPathError, match="it is a directory"), replacing(out) as tmp:
        tmp.write_text("data")
        out.mkdir()
    assert leftovers(tmp_path) == [] and out.is_dir()
