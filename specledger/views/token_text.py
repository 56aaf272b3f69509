"""Token ids as text, for a diff's first differing token: each session read with the
tokenizer of the model it ran, where its model directory has a `tokenizer.json` (the
shipped models do). A llama-server import names only a GGUF file, so it reads with the
other session's tokenizer (a diff compares the same conversation); sim sessions' ids are
synthetic and are not decoded."""

from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from engine.config import OBSERVED
from eventlog.reader import SessionInfo

if TYPE_CHECKING:
    from tokenizers import Tokenizer

Decoder = Callable[[Sequence[int | None]], str]
"""Text of token ids (ids a log does not name, None, are left out)."""


def session_tokenizer(info: SessionInfo) -> Path | None:
    """The `tokenizer.json` of the model `info` ran, when the session says and it exists."""
    if info.backend == "sim":
        return None
    run = info.config.get("run") if info.backend in OBSERVED else info.config
    model = run.get("model") if isinstance(run, dict) else None
    if not isinstance(model, str):
        return None
    from engine.errors import ConfigError
    from engine.shipped import model_dir

    try:
        path = model_dir(model) / "tokenizer.json"
    except ConfigError:
        return None
    return path if path.is_file() else None


def decoders(a: SessionInfo, b: SessionInfo) -> tuple[Decoder | None, Decoder | None]:
    """A decoder for each session (None where no tokenizer is known for either)."""
    pa, pb = session_tokenizer(a), session_tokenizer(b)
    return _decoder(pa or pb), _decoder(pb or pa)


def _decoder(path: Path | None) -> Decoder | None:
    if path is None:
        return None
    tokenizer = _load(path)
    size = tokenizer.get_vocab_size(with_added_tokens=True)

    def decode(ids: Sequence[int | None]) -> str:
        return tokenizer.decode([i for i in ids if i is not None and 0 <= i < size],
                                skip_special_tokens=False)

    return decode


@lru_cache(maxsize=4)
def _load(path: Path) -> "Tokenizer":
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))
