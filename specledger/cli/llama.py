"""`specledger llama builds` and `specledger llama build VERSION [--cuda]`: the llama.cpp
build matrix (adapters/llama/builds/matrix.py) and building one of its servers into the cache, side
by side with the others (tools/build_llama.sh, 10-16 minutes on 2 cores, then skipped); with
--cuda its CUDA server beside the CPU one (`run --backend llama --device cuda` runs it).
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.llama.builds.matrix import MATRIX, facts, matrix
from adapters.llama.errors import LlamaNotBuiltError
from adapters.llama.server.paths import DEFAULT_BUILD, built, check_build, server_label, server_path

if TYPE_CHECKING:
    from adapters.llama.builds.matrix import Build

BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "build_llama.sh"


def run(args: argparse.Namespace) -> int:
    """Dispatch `llama builds` / `llama build VERSION`."""
    if args.llama_command == "build":
        return _build(check_build(args.version), args.json, args.cuda)
    return _builds(args.json)


def _row(version: str, build: "Build | None") -> dict[str, Any]:
    return {"version": version, "default": version == DEFAULT_BUILD, "built": built(version),
            "server": str(server_path(version)), "built_cuda": built(version, cuda=True),
            "commit": build.commit if build else None, "date": build.date if build else None,
            "spec_types": list(build.spec_types) if build else None,
            "spec_checkpoints": build.spec_checkpoints if build else None,
            "exposures": {k: v.value for k, v in build.exposures.items()} if build else None}


def _builds(as_json: bool) -> int:
    """The matrix, with which builds are in the cache."""
    from rich.table import Table

    from specledger.views import output

    known = {b.version: b for b in matrix()}  # builds.json read once
    builds = [known.get(v) for v in MATRIX]
    rows = [_row(v, b) for v, b in zip(MATRIX, builds, strict=True)]
    if as_json:
        output.emit_json({"builds": rows})
        return 0
    table = Table(title="llama.cpp builds (llama-cpp-python version)")
    for col in ("build", "llama.cpp", "date", "speculation", "built", "CUDA"):
        table.add_column(col)
    for row, build in zip(rows, builds, strict=True):
        spec = ("-" if build is None else
                "refused on hybrid" if not build.spec_checkpoints else
                ", ".join(t for t in build.spec_types if t != "none"))
        name = row["version"] + (" (default)" if row["default"] else "")
        table.add_row(name, build.short if build else "?", (build.date[:10] if build else "?"),
                      spec, "yes" if row["built"] else f"specledger llama build {row['version']}",
                      "yes" if row["built_cuda"] else "-")
    output.console.print(table)
    if not known:
        output.console.print("no build facts: run tools/llama_matrix.py")
    return 0


def _build(version: str, as_json: bool, cuda: bool = False) -> int:
    """Build `version`'s llama-server (its CUDA one when `cuda`; and keep its converter) in
    the cache; the script's progress goes to stderr under --json, whose one document says
    where the server is."""
    if not BUILD_SCRIPT.is_file():
        raise LlamaNotBuiltError(f"the build script {BUILD_SCRIPT} ships with specledger's "
                                 f"source checkout, not with this install")
    env = {**os.environ, "LLAMA_PY_VERSION": version, "PYTHON": sys.executable,
           "LLAMA_CUDA": "1" if cuda else "0"}
    done = subprocess.run(["sh", str(BUILD_SCRIPT)], env=env, check=False,
                          stdout=sys.stderr if as_json else None)
    if done.returncode != 0:
        raise LlamaNotBuiltError(f"building {server_label(cuda)} {version} failed (exit status "
                                 f"{done.returncode}); the log is in the cache folder above")
    if as_json:
        from specledger.views import output

        output.emit_json(_row(version, facts(version)))
    return 0


def add_parser(sub: Any) -> None:
    """The `llama` subcommand and its two children."""
    p = sub.add_parser("llama", help="the llama.cpp builds: list the matrix, build one")
    kids = p.add_subparsers(dest="llama_command", required=True, parser_class=type(p))
    builds = kids.add_parser("builds", help="the build matrix and which builds are in the "
                                            "cache")
    build = kids.add_parser("build", help="build one llama-server into the cache")
    build.add_argument("version", help="llama-cpp-python version, e.g. 0.3.30")
    build.add_argument("--cuda", action="store_true",
                       help="its CUDA server (nvcc and cuBLAS from the machine, else from the "
                            "package registry; GPU architecture LLAMA_CUDA_ARCH, default 90)")
    for child in (builds, build):  # no --db: the cache is not a ledger
        child.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(run=run)
