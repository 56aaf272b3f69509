"""Where specledger finds llama.cpp: the one place that knows the cache layout.

`tools/build_llama.sh` (`make llama`, `specledger llama build VERSION`) builds `llama-server`
from the llama.cpp vendored in the PyPI sdist of llama-cpp-python VERSION and keeps it,
with that tree's GGUF converter, under the cache root, one folder per build side by side:

    <cache>/llama.cpp/<VERSION>/bin/llama-server
    <cache>/llama.cpp/<VERSION>/bin/llama-server-cuda   (`specledger llama build VERSION --cuda`)
    <cache>/llama.cpp/<VERSION>/convert/{convert_hf_to_gguf.py,gguf-py[,conversion]}

A build is named by its llama-cpp-python version (adapters/llama/builds/matrix.py pins the matrix);
DEFAULT_BUILD is the one `make llama` builds and every command uses unless told otherwise.
`SPECLEDGER_CACHE` moves the cache root (default `$XDG_CACHE_HOME/specledger`, else
`~/.cache/specledger`); `SPECLEDGER_LLAMA_SERVER` names another `llama-server` binary for
the default build.
"""

import os
from pathlib import Path

from adapters.cache import cache_root
from adapters.llama.errors import LlamaNotBuiltError, UnknownBuildError
from engine.config import DEFAULT_BUILD, is_version

LLAMA_PY_VERSION = DEFAULT_BUILD  # the name tools/build_llama.sh's environment uses
SERVER_ENV = "SPECLEDGER_LLAMA_SERVER"


def check_build(build: str) -> str:
    """`build` if it names a llama-cpp-python version (X.Y.Z), else UnknownBuildError."""
    if not is_version(build):
        raise UnknownBuildError(f"llama build: '{build}' is not a llama-cpp-python version "
                                f"such as {DEFAULT_BUILD} (`specledger llama builds` lists "
                                f"the matrix)")
    return build


def server_label(cuda: bool = False) -> str:
    """How messages name the server: the CPU one, or the CUDA one."""
    return "llama-server (CUDA)" if cuda else "llama-server"


def build_hint(build: str, cuda: bool = False) -> str:
    """The command that builds `build` (its CUDA server when `cuda`)."""
    if cuda:
        return f"run specledger llama build {build} --cuda"
    return ("run make llama" if build == DEFAULT_BUILD
            else f"run specledger llama build {build}")


def llama_root(build: str = DEFAULT_BUILD) -> Path:
    """The folder of one llama.cpp build."""
    return cache_root() / "llama.cpp" / check_build(build)


def _explicit_server(build: str, cuda: bool) -> Path | None:
    """`SPECLEDGER_LLAMA_SERVER`, where it names the server (the default build's CPU one)."""
    explicit = os.environ.get(SERVER_ENV)
    return Path(explicit).expanduser() if explicit and build == DEFAULT_BUILD and not cuda \
        else None


def server_path(build: str = DEFAULT_BUILD, cuda: bool = False) -> Path:
    """Where `llama-server` of `build` should be, its CUDA build's when `cuda` (for the
    default build's CPU server `SPECLEDGER_LLAMA_SERVER` wins)."""
    return _explicit_server(build, cuda) or (
        llama_root(build) / "bin" / ("llama-server-cuda" if cuda else "llama-server"))


def converter_dir(build: str = DEFAULT_BUILD) -> Path:
    """Where the vendored GGUF converter of `build` (convert_hf_to_gguf.py, gguf-py/, and
    from 0.3.24 on conversion/) should be."""
    return llama_root(build) / "convert"


def built(build: str, cuda: bool = False) -> bool:
    """Whether `build`'s llama-server (its CUDA one when `cuda`) is in the cache."""
    path = server_path(build, cuda)
    return path.is_file() and os.access(path, os.X_OK)


def require_server(build: str = DEFAULT_BUILD, cuda: bool = False) -> Path:
    """The `llama-server` binary of `build` (its CUDA build when `cuda`), or
    LlamaNotBuiltError saying how to get it."""
    path = server_path(build, cuda)
    if not built(build, cuda):
        origin = f"${SERVER_ENV}" if _explicit_server(build, cuda) else "the cache"
        raise LlamaNotBuiltError(f"{server_label(cuda)} {build} not found at {path} ({origin}): "
                                 f"{build_hint(build, cuda)}")
    return path


def require_converter(build: str = DEFAULT_BUILD) -> Path:
    """The converter folder of `build`, or LlamaNotBuiltError saying how to get it."""
    root = converter_dir(build)
    missing = [p for p in ("convert_hf_to_gguf.py", "gguf-py") if not (root / p).exists()]
    if missing:
        raise LlamaNotBuiltError(f"the llama.cpp {build} GGUF converter is missing from "
                                 f"{root} (no {missing[0]}): {build_hint(build)}")
    return root
