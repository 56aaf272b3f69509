"""Which engine wrote a log, from its first lines: what `import` says when a user names
the wrong engine (a vLLM log passed to `import sglang` is refused with the command that
reads it)."""

from collections.abc import Callable, Iterable
from itertools import islice
from pathlib import Path

from adapters.logs.sources import LogSource, SourceError, Stream
from fsm.errors import SpecledgerError

_GUESS_LINES = 500  # enough for a start-up or a few stats lines of any engine


def _readers() -> dict[str, Callable[[Iterable[bytes], str], object]]:
    """Each engine's reader of a stream of lines, by the name `import` takes, the strictest
    first: llama-server's reader counts any line of a server's shape as its own, so an
    SGLang log's lines pass it too."""
    from adapters.llama.log.reader import read_lines as read_llama
    from adapters.sglang.log.reader import read_lines as read_sglang
    from adapters.vllm.log.reader import read_lines as read_vllm

    return {"vllm": read_vllm, "sglang": read_sglang, "llama-server": read_llama}


def guess_engine(path: Path) -> str | None:
    """The engine (`llama-server`, `vllm`, `sglang`) whose reader finds its own lines among
    the file's first lines, or None (unreadable, or no engine's)."""
    try:
        head = list(islice(Stream(LogSource((path,)).parts).lines(), _GUESS_LINES))
    except (SourceError, OSError):
        return None
    for engine, read in _readers().items():
        try:
            read(head, path.name)
        except SpecledgerError:
            continue
        return engine
    return None
