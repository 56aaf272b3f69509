"""What an install gives a user: the read commands without torch, and the shipped models
found from any directory by a non-editable install."""

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from engine.shipped import NAMES
from specledger.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SIM = ["--backend", "sim", "--turns", "2", "--prompt-tokens", "64", "--question-tokens", "8",
       "--answer-tokens", "40", "--json"]

# Runs the CLI in a process where the engine's packages cannot be imported, as after a bare
# `pip install specledger`.
_NO_ENGINE = """
import importlib.abc, sys
BLOCKED = {"torch", "safetensors", "tokenizers", "matplotlib", "triton", "transformers"}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
from specledger.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _no_engine(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _NO_ENGINE, *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def test_read_commands_need_no_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    db = str(tmp_path / "log.db")
    assert main(["run", "--db", db, *SIM]) == 0
    assert main(["run", "--db", db, *SIM, "--eog-policy", "legacy"]) == 0
    capsys.readouterr()
    for argv, status in [
        (["sessions"], 0), (["show", "1"], 0), (["replay", "1", "--at", "20"], 0),
        (["diff", "1", "2"], 1), (["postmortem", "1"], 0),
        (["graph", "2", "--kind", "timeline", "--out", "t.svg"], 0),
        (["report", "1", "2", "--out", "r.html"], 0),
        (["run", *SIM], 0),  # the sim is part of the base install
    ]:
        r = _no_engine(tmp_path, *argv, "--db", db)
        assert r.returncode == status, (argv, r.stderr)
        assert "Traceback" not in r.stderr, (argv, r.stderr)
    assert (tmp_path / "t.svg").stat().st_size and (tmp_path / "r.html").stat().st_size


def test_engine_commands_name_the_extra_without_it(tmp_path: Path) -> None:
    for argv in (["run", "--turns", "1"], ["scenario", "eog-tail", "--backend", "torch"],
                 ["bench", "recorder", "--quick", "--out", "b"]):
        r = _no_engine(tmp_path, *argv)
        lines = r.stderr.strip().splitlines()  # bench logs its suites' names first
        assert r.returncode == 1 and "Traceback" not in r.stderr, (argv, r.stderr)
        assert "needs the engine" in lines[-1], lines
        assert "pip install 'specledger[engine]'" in lines[-1], lines


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package installed non-editable (the wheel's files, dependencies from this
    environment) into a folder of its own."""
    # From a copy: setuptools builds in the source tree, and the checkout stays clean.
    source = tmp_path_factory.mktemp("src") / "specledger"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", "tests", "bench", ".*cache"))
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--target", str(target), str(source)],
                   check=True, capture_output=True, timeout=300)
    return target


def _installed_cli(site: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    # -S: no site processing, so the checkout's editable-install hook is not loaded and
    # only the installed copy can be imported; the dependencies come from this environment.
    boot = ("import sys; sys.path[:0] = [sys.argv.pop(1)]; sys.path.append(sys.argv.pop(1));"
            " import engine; assert engine.__file__.startswith(sys.path[0]), engine.__file__;"
            " from specledger.cli.main import main; sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-S", "-c", boot, str(site),
                           sysconfig.get_paths()["purelib"], *argv],
                          cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def test_a_non_editable_install_carries_the_shipped_models(installed: Path,
                                                           tmp_path: Path) -> None:
    for name in NAMES:
        folder = installed / "engine" / "shipped" / name
        assert (folder / "model.safetensors").stat().st_size > 0
        assert (folder / "config.json").exists() and (folder / "tokenizer.json").exists()
    for drafter in ("mtp", "draft-model"):
        r = _installed_cli(installed, tmp_path, "run", "--turns", "1", "--max-answer-tokens",
                           "16", "--drafter", drafter, "--json")
        assert r.returncode == 0, r.stderr[-2000:]
        assert json.loads(r.stdout)["turns"][0]["generated_tokens"] > 0
    r = _installed_cli(installed, tmp_path, "sessions", "--json")
    sessions = json.loads(r.stdout)
    assert [s["backend"] for s in sessions] == ["torch", "torch"]
    show = json.loads(_installed_cli(installed, tmp_path, "show", "1", "--json").stdout)
    assert show["session"]["config"]["model"] == "shipped:target"
    assert show["session"]["model_digest"]
