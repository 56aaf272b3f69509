"""The models this project trains and ships (`target`: the hybrid target with its MTP head,
`draft`: the small draft model; `wide` and `wide-draft`: the same pair with the head widths
vLLM's CPU kernels accept, so that vLLM, llama.cpp and our engine run the same weights),
installed with the package so that they are found from any working directory and in any
install, editable or not.

A model option names either a local HF-style directory or a shipped model as
`shipped:NAME`. Sessions recorded before the models moved here stored the checkout-relative
paths `models/target` and `models/draft`; where no such directory exists, those names mean
the shipped models, so old ledgers still re-execute.
"""

from pathlib import Path

from engine.errors import ConfigError

ROOT = Path(__file__).resolve().parent
NAMES = ("target", "draft", "wide", "wide-draft")
PREFIX = "shipped:"
_LEGACY = {f"models/{name}": name for name in ("target", "draft")}


def model_dir(spec: str | Path) -> Path:
    """The directory a model option names: a shipped model, or the path itself."""
    text = str(spec)
    if text.startswith(PREFIX):
        name = text[len(PREFIX):]
        if name not in NAMES:
            raise ConfigError(f"no shipped model '{name}' (shipped: "
                              f"{', '.join(PREFIX + n for n in NAMES)})")
        return ROOT / name
    path = Path(text)
    if text in _LEGACY and not path.is_dir():
        return ROOT / _LEGACY[text]
    return path
