"""tools/llama_history.py numbers master's commits as llama.cpp does (the commit count,
a merge counting what it brings) and finds each incident's first bug build and the first
build after it whose source no longer carries the bug; a bug that comes back is refused,
since one span is all the data can say."""

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

from adapters.llama.builds.matrix import Exposure

SPEC = importlib.util.spec_from_file_location(
    "llama_history", Path(__file__).parents[2] / "tools" / "llama_history.py")
assert SPEC is not None and SPEC.loader is not None
TOOL = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(TOOL)

SERVER = "tools/server/server-context.cpp"
CKPT = "speculative decoding will use checkpoints\n"
REUSE = "we have a previous (partial) draft to reuse\n"
FIX = "if (slot.spec_is_replay && n_accepted > 0)\n"


def git(repo: Path, *args: str) -> None:
    """A git command in the work tree `repo`."""
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
                        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"})


def commit(repo: Path, message: str, server: str | None = None) -> None:
    """One commit: the server source when given, else a file of its own."""
    path = repo / SERVER if server is not None else repo / message.split(":")[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(server if server is not None else message)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def test_build_numbers_and_one_incidents_span(tmp_path: Path) -> None:
    repo = tmp_path / "llama.cpp"
    git(tmp_path, "init", "-q", "-b", "master", str(repo))
    commit(repo, "b1")
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, "side commit")
    git(repo, "checkout", "-q", "master")
    commit(repo, "b2")
    git(repo, "merge", "-q", "--no-ff", "-m", "b4: a merge brings the side commit", "side")
    commit(repo, "b5: checkpoints and their replay", CKPT + REUSE)
    commit(repo, "b6")
    commit(repo, "b7: the fix", CKPT + REUSE + FIX)
    commits = TOOL.master(repo / ".git", "master")
    assert [c.build for c in commits] == [1, 2, 4, 5, 6, 7]  # b3 is the side commit's
    assert commits[2].subject.startswith("b4") and commits[-1].subject == "b7: the fix"
    seen = TOOL.exposures(repo / ".git", commits)
    assert [c.build for c, _ in seen] == [5, 7]  # only the commits that change a read file
    span = TOOL.span("PR 26320", seen)
    assert span["bug"]["build"] == 5 and span["fix"]["build"] == 7
    assert span["fix"]["how"] == "the fix's code is in"
    assert TOOL.span("#28060", seen)["fix"] is None  # no fix code: open at the tip


def test_a_bug_that_comes_back_is_refused() -> None:
    marks = [TOOL.Commit(n, f"{n:040x}", "2026-01-01", f"b{n}") for n in (1, 2, 3)]
    seen = [(c, {"PR 26320": e}) for c, e in zip(
        marks, (Exposure.BUG, Exposure.ABSENT, Exposure.BUG), strict=True)]
    with pytest.raises(SystemExit, match="comes and goes"):
        TOOL.span("PR 26320", seen)
    gone = TOOL.span("PR 26320", seen[:2])
    assert gone["fix"]["build"] == 2 and gone["fix"]["how"] == "the bug's code is gone"
