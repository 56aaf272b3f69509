"""bench/torch_speculative.py: a quick run on the device it is given, recorded in its
results, and --device cuda without a GPU refused in one line."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "torch_speculative.py"


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    """The script from outside the repository root, one torch thread."""
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd="/",
                          env={**os.environ, "OMP_NUM_THREADS": "1", **env},
                          capture_output=True, text=True, timeout=300, check=False)


def test_quick_run_on_cpu_records_the_device(tmp_path: Path) -> None:
    done = _run("--quick", "--device", "cpu", "--out", str(tmp_path / "ts"))
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "ts.json").read_text())
    assert results["env"]["device"] == "cpu" and "gpu" not in results["env"]
    assert results["config"]["device"] == "cpu"
    assert results["lossless"]["tokens_compared"] > 0 and not results["lossless"]["mismatches"]
    assert results["vs_transformers"]["same_tokens"] is True
    assert "Plain decode on cpu:" in (tmp_path / "ts.md").read_text()


def test_cuda_without_a_gpu_is_refused_in_one_line(tmp_path: Path) -> None:
    # An empty CUDA_VISIBLE_DEVICES hides every GPU, so this runs on GPU machines too.
    done = _run("--quick", "--device", "cuda", "--out", str(tmp_path / "ts"),
                CUDA_VISIBLE_DEVICES="")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        "sees no CUDA device; use --device cpu (or auto)")
    assert not list(tmp_path.iterdir())
