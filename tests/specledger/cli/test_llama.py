"""`specledger llama builds` and `specledger llama build VERSION`."""

import json
from pathlib import Path

import pytest

from adapters.cache import CACHE_ENV
from adapters.llama.builds.matrix import MATRIX
from adapters.llama.server import paths
from specledger.cli import llama as llama_cmd
from tests.specledger.helpers import exit_status


def test_builds_lists_the_matrix_and_what_is_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.delenv(paths.SERVER_ENV, raising=False)
    server = paths.server_path("0.3.30")
    server.parent.mkdir(parents=True)
    server.write_text("#!/bin/sh\n")
    server.chmod(0o755)
    assert exit_status(["llama", "builds", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["builds"]
    assert [r["version"] for r in rows] == list(MATRIX)
    assert [r["version"] for r in rows if r["built"]] == ["0.3.30"]
    assert [r["version"] for r in rows if r["default"]] == [paths.DEFAULT_BUILD]
    newest = rows[-1]
    assert newest["exposures"]["PR 26320"] == "fixed" and len(newest["commit"]) == 40
    assert exit_status(["llama", "builds"]) == 0
    shown = capsys.readouterr().out
    assert "specledger llama build 0.3.21" in shown and "refused on hybrid" in shown


def test_build_refuses_a_name_that_is_no_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_status(["llama", "build", "latest"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'latest' is not a llama-cpp-python version" in err


def test_build_runs_the_build_script_for_that_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "build_llama.sh"
    script.write_text('echo "building $LLAMA_PY_VERSION with $PYTHON"\n'
                      '[ "$LLAMA_PY_VERSION" = 0.3.24 ]\n')
    monkeypatch.setattr(llama_cmd, "BUILD_SCRIPT", script)
    assert exit_status(["llama", "build", "0.3.24"]) == 0
    assert "building 0.3.24 with" in capfd.readouterr().out
    assert exit_status(["llama", "build", "0.3.21"]) == 1  # the script failed
    assert "building llama-server 0.3.21 failed" in capfd.readouterr().err



def test_build_cuda_asks_the_script_for_the_cuda_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "build_llama.sh"
    script.write_text('echo "cuda=$LLAMA_CUDA"\n[ "$LLAMA_CUDA" = 0 ]\n')
    monkeypatch.setattr(llama_cmd, "BUILD_SCRIPT", script)
    assert exit_status(["llama", "build", "0.3.36"]) == 0
    assert "cuda=0" in capfd.readouterr().out
    assert exit_status(["llama", "build", "0.3.36", "--cuda"]) == 1  # the script failed
    out, err = capfd.readouterr()
    assert "cuda=1" in out and "building llama-server (CUDA) 0.3.36 failed" in err
