"""Writing a file the user named: whole, or not at all.

Every file a command writes (session exports, reports, graphs, the GGUF export) goes
through `replacing`, under one rule:

- The target must be a regular file or missing. A directory, a device, a fifo or a socket
  (or a symlink to one) is refused in one line before anything is written. A symlink to a
  regular file is followed: the file it names is replaced and the link stays.
- Missing parent directories are created, as `--db` creates a new ledger's; those it
  created are removed again when the write fails.
- The content goes to a temporary file beside the target (`NAME.PID.HEX.partial`), is
  synced, and is renamed over the target only when complete. A failed write (a full disk,
  an interrupt, an error of the writer) removes the temporary file and leaves the file that
  was there as it was.
"""

import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fsm.errors import SpecledgerError


class OutputPathError(SpecledgerError):
    """The path to write names something other than a regular file."""


class OutputWriteError(SpecledgerError):
    """Writing the file failed; the target was left as it was."""


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a fifo"),
          (stat.S_ISSOCK, "a socket"))


def check_target(path: str | Path) -> Path:
    """The file to replace when writing `path` (its symlinks followed); refuses a path that
    names anything but a regular file or nothing, or whose folder is a file."""
    path = Path(path)
    try:
        real = path.resolve()
    except RuntimeError:
        raise OutputPathError(f"cannot write {path}: its symlinks form a loop") from None
    try:
        mode = real.stat().st_mode
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        raise OutputPathError(f"cannot write {path}: a folder on its path is a file") from None
    if mode is not None and not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        via = f" ({path} links to it)" if real != Path(os.path.abspath(path)) else ""
        raise OutputPathError(f"cannot write {real}{via}: it is {kind}; name a regular file "
                              "to write (or a new one)")
    return real


@contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` for the caller to write the whole file to; when the
    block ends without an error it replaces `path` (see the module's rules), else it is
    removed and `path` is left as it was. An OSError on the way (a full disk, a folder
    that cannot be written) becomes one OutputWriteError line."""
    target = check_target(path)
    existed = target.exists()
    missing = [p for p in target.parents if not p.exists()]  # deepest first
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{secrets.token_hex(4)}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # Created here (mode 0666 less the umask, as a plain open gives), not by the
        # writer, so that the name is ours alone.
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        yield tmp
        _sync(tmp)
        check_target(target)  # it may have changed kind while we wrote
        if existed and target.exists():
            os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
        os.replace(tmp, target)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        for folder in missing:
            try:
                folder.rmdir()
            except OSError:
                break
        if isinstance(exc, OSError):
            left = "it is unchanged" if existed else "nothing was written"
            raise OutputWriteError(f"cannot write {path}: {exc.strerror or exc} ({left})"
                                   ) from exc
        raise


def _sync(tmp: Path) -> None:
    """Flush the written file to the disk, where a full disk may show only now."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: str | Path, data: bytes | str) -> Path:
    """Write `data` (text is UTF-8) to `path` under `replacing`'s rules; the path."""
    with replacing(path) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return Path(path)
