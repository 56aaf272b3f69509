"""Every shell script the project runs parses (`sh -n`): the GPU session's scripts run once
on a machine that is lent for minutes, so a syntax error there costs the session."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([*ROOT.glob("tools/*.sh"), *ROOT.glob("bench/*.sh"), ROOT / ".ci" / "run"])


def test_the_gpu_session_scripts_are_among_them() -> None:
    names = {p.name for p in SCRIPTS}
    assert {"gpu_session.sh", "gpu_carry.sh", "gpu_results.sh", "build_llama.sh",
            "cuda_toolkit.sh"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_it_parses(script: Path) -> None:
    done = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, done.stderr
