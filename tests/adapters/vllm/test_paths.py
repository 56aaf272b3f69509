"""Where specledger looks for vLLM's environment, and the one-line error when it is not
there."""

from pathlib import Path

import pytest

from adapters.cache import CACHE_ENV
from adapters.vllm import paths
from adapters.vllm.errors import VllmNotInstalledError


def test_missing_install_names_the_command(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.delenv(paths.PYTHON_ENV, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    with pytest.raises(VllmNotInstalledError) as raised:
        paths.require_python()
    message = str(raised.value)
    assert "\n" not in message
    assert str(tmp_path / "vllm" / paths.VLLM_VERSION / "venv" / "bin" / "python") in message
    assert message.endswith("run make vllm")


def test_a_venv_without_the_stamp_is_not_installed(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    # The install script stamps last: a venv from an interrupted install is not used.
    monkeypatch.delenv(paths.PYTHON_ENV, raising=False)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    python = paths.python_path()
    python.parent.mkdir(parents=True)
    python.touch()
    assert not paths.installed()
    (paths.vllm_root() / ".installed").touch()
    assert paths.require_python() == python


def test_explicit_interpreter_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    python = tmp_path / "python"
    python.touch()
    monkeypatch.setenv(paths.PYTHON_ENV, str(python))
    assert paths.require_python() == python
    monkeypatch.setenv(paths.PYTHON_ENV, str(tmp_path / "absent"))
    with pytest.raises(VllmNotInstalledError, match=r"\$SPECLEDGER_VLLM_PYTHON"):
        paths.require_python()
