"""The suite's --device option (tests/conftest.py): cpu by default, and a --device cuda run
that cannot mean what it says refused in one line before anything is collected."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = "def test_probe(torch_device):\n    assert torch_device.type == {expected!r}\n"


def _pytest(tmp_path: Path, *args: str, expected: str = "cpu", **env: str
            ) -> subprocess.CompletedProcess:
    """pytest on a one-test folder with the suite's conftest loaded as a plugin (its own
    pytest.ini keeps the project's addopts out); `env` is added to this environment."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_probe.py").write_text(PROBE.format(expected=expected))
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.conftest",
           "-q", *args, str(tmp_path)]
    base = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run(cmd, cwd=ROOT, env={**base, **env}, capture_output=True, text=True,
                          timeout=120, check=False)


def _error_lines(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]


def test_the_default_is_cpu(tmp_path: Path) -> None:
    done = _pytest(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_cuda_without_a_gpu_is_refused_in_one_line(tmp_path: Path) -> None:
    # An empty CUDA_VISIBLE_DEVICES hides every GPU, so this runs on GPU machines too.
    done = _pytest(tmp_path, "--device", "cuda", expected="cuda", CUDA_VISIBLE_DEVICES="")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    lines = _error_lines(done)
    assert len(lines) == 1 and "sees no CUDA device" in lines[0], lines


def test_cuda_under_the_triton_interpreter_is_refused_in_one_line(tmp_path: Path) -> None:
    done = _pytest(tmp_path, "--device", "cuda", expected="cuda", TRITON_INTERPRET="1")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    lines = _error_lines(done)
    assert len(lines) == 1 and "unset TRITON_INTERPRET" in lines[0], lines
