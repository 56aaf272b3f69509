"""Where specledger finds llama.cpp: the one place that knows the cache layout.

`tools/build_llama.sh` (`make llama`) builds `llama-server` from the llama.cpp vendored in
the PyPI sdist of llama-cpp-python LLAMA_PY_VERSION and keeps it, with that tree's GGUF
converter, under the cache root:

    <cache>/llama.cpp/<LLAMA_PY_VERSION>/bin/llama-server
    <cache>/llama.cpp/<LLAMA_PY_VERSION>/convert/{convert_hf_to_gguf.py,gguf-py,conversion}

`SPECLEDGER_CACHE` moves the cache root (default `$XDG_CACHE_HOME/specledger`, else
`~/.cache/specledger`); `SPECLEDGER_LLAMA_SERVER` names another `llama-server` binary.
"""

import os
from pathlib import Path

from engine.llama.errors import LlamaNotBuiltError

LLAMA_PY_VERSION = "0.3.36"
SERVER_ENV = "SPECLEDGER_LLAMA_SERVER"
CACHE_ENV = "SPECLEDGER_CACHE"
BUILD_HINT = "run make llama"


def cache_root() -> Path:
    """specledger's cache folder (it may not exist yet)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "specledger"


def llama_root() -> Path:
    """The folder of the pinned llama.cpp build."""
    return cache_root() / "llama.cpp" / LLAMA_PY_VERSION


def server_path() -> Path:
    """Where `llama-server` should be: `SPECLEDGER_LLAMA_SERVER`, else the build's."""
    explicit = os.environ.get(SERVER_ENV)
    return Path(explicit).expanduser() if explicit else llama_root() / "bin" / "llama-server"


def converter_dir() -> Path:
    """Where the vendored GGUF converter (convert_hf_to_gguf.py, gguf-py/, conversion/)
    should be."""
    return llama_root() / "convert"


def require_server() -> Path:
    """The `llama-server` binary, or LlamaNotBuiltError saying how to get it."""
    path = server_path()
    if not path.is_file() or not os.access(path, os.X_OK):
        origin = f"${SERVER_ENV}" if os.environ.get(SERVER_ENV) else "the cache"
        raise LlamaNotBuiltError(f"llama-server not found at {path} ({origin}): {BUILD_HINT}")
    return path


def require_converter() -> Path:
    """The converter folder, or LlamaNotBuiltError saying how to get it."""
    root = converter_dir()
    missing = [p for p in ("convert_hf_to_gguf.py", "gguf-py", "conversion")
               if not (root / p).exists()]
    if missing:
        raise LlamaNotBuiltError(f"the llama.cpp GGUF converter is missing from {root} "
                                 f"(no {missing[0]}): {BUILD_HINT}")
    return root
