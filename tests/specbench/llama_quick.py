"""The quick run of a llama suite, shared by its tests."""

import json
from pathlib import Path
from typing import Any

from adapters.llama.server.paths import require_converter, require_server
from specbench import SUITES, BenchOptions, SuiteResult, run_suite
from tests.adapters.llama.conftest import require_llama


def run_quick(name: str, tmp_path: Path) -> tuple[SuiteResult, dict[str, Any]]:
    """Run llama suite `name` with --quick into `tmp_path` (skipped without the default
    build's server and converter); its result and its results.json."""
    require_llama(require_server)
    require_llama(require_converter)
    assert name in SUITES
    result = run_suite(name, BenchOptions(out=tmp_path, db=str(tmp_path / "b.db"), quick=True))
    return result, json.loads((tmp_path / name / "results.json").read_text())
