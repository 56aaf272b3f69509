"""The cache outside git where third-party engines live once built or installed: llama.cpp
builds (adapters/llama/server/paths.py) and the vLLM environment (adapters/vllm/paths.py).
`SPECLEDGER_CACHE` moves it (default `$XDG_CACHE_HOME/specledger`, else
`~/.cache/specledger`)."""

import os
from pathlib import Path

CACHE_ENV = "SPECLEDGER_CACHE"


def cache_root() -> Path:
    """specledger's cache folder (it may not exist yet)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "specledger"
