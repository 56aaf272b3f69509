"""tools/cuda_toolkit.sh on fake toolkits: a complete one is used as it is; nvcc without
cuBLAS is joined with the Python's NVIDIA wheels in a folder of links in the cache, and the
toolkit itself is left as it was (its lib64 is a link to lib, as in NVIDIA's layout)."""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "cuda_toolkit.sh"


def _toolkit(root: Path, cublas: bool) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "nvcc").write_text("#!/bin/sh\necho 'Build cuda_13.0'\n")
    (root / "bin" / "nvcc").chmod(0o755)
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("")
    (root / "lib").mkdir()
    (root / "lib" / "libcudart.so.13").write_text("")
    (root / "lib64").symlink_to("lib")
    if cublas:
        (root / "include" / "cublas_v2.h").write_text("")
    return root


def _wheels(site: Path) -> Path:
    cu13 = site / "nvidia" / "cu13"  # a namespace package, as NVIDIA's wheels install it
    (cu13 / "include").mkdir(parents=True)
    (cu13 / "include" / "cublas_v2.h").write_text("")
    (cu13 / "lib").mkdir()
    for name in ("libcublas.so.13", "libcublasLt.so.13"):
        (cu13 / "lib" / name).write_text("")
    return cu13


def _run(tmp_path: Path, cuda_home: Path, site: Path) -> str:
    env = {**os.environ, "CUDA_HOME": str(cuda_home), "CACHE": str(tmp_path / "cache"),
           "PYTHON": sys.executable, "PYTHONPATH": str(site)}
    done = subprocess.run(["sh", str(SCRIPT)], env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout.strip()


def test_a_toolkit_with_cublas_is_used_as_it_is(tmp_path: Path) -> None:
    root = _toolkit(tmp_path / "cuda", cublas=True)
    assert _run(tmp_path, root, tmp_path / "site") == str(root)
    assert not (tmp_path / "cache").exists()


def test_nvcc_alone_is_joined_with_the_wheels_cublas_in_the_cache(tmp_path: Path) -> None:
    root = _toolkit(tmp_path / "cuda", cublas=False)
    _wheels(tmp_path / "site")
    before = sorted(p.name for p in (root / "lib").iterdir())
    merged = Path(_run(tmp_path, root, tmp_path / "site"))
    assert merged == tmp_path / "cache" / "cuda-toolkit" / "13.0" / "merged"
    assert (merged / "bin" / "nvcc").is_file() and (merged / "include" / "cublas_v2.h").is_file()
    lib64 = merged / "lib64"
    assert lib64.is_dir() and not lib64.is_symlink()
    assert os.readlink(lib64 / "libcublas.so") == "libcublas.so.13"
    assert {"libcudart.so.13", "libcublas.so.13", "libcublasLt.so"} <= {
        p.name for p in lib64.iterdir()}
    # the toolkit gained nothing: the links live in the cache
    assert sorted(p.name for p in (root / "lib").iterdir()) == before
    assert not (root / "include" / "cublas_v2.h").exists()
