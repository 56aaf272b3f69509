"""tools/capture_vllm_logs.py on a fresh run (needs vLLM: `make test-vllm`): the log of
our own `run --backend vllm` session, imported with `specledger import vllm`, gives the
session's drafted and accepted tokens."""

import importlib.util
import json
from pathlib import Path

import pytest

from tests.adapters.vllm.conftest import require_vllm
from tests.adapters.vllm.log.test_capture import imported_acceptance

SPEC = importlib.util.spec_from_file_location(
    "capture_vllm_logs", Path(__file__).parents[2] / "tools" / "capture_vllm_logs.py")
assert SPEC is not None and SPEC.loader is not None
TOOL = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(TOOL)

pytestmark = pytest.mark.vllm  # make test-vllm runs it


def test_a_fresh_runs_log_imports_to_its_sessions_acceptance(tmp_path: Path) -> None:
    require_vllm()
    TOOL.capture("default", tmp_path, tmp_path)
    recorded = json.loads((tmp_path / "default.session.json").read_text())
    _, drafted, accepted = imported_acceptance(tmp_path / "default.log.gz",
                                               f"sqlite:///{tmp_path / 'i.db'}")
    assert recorded["drafted"] > 0
    assert (drafted, accepted) == (recorded["drafted"], recorded["accepted"])
