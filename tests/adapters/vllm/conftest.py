"""Fixtures of the tests that run vLLM: its environment (skipped when absent, failed when
SPECLEDGER_REQUIRE_VLLM=1), the model it runs (the shipped wide pair: the head widths
vLLM's CPU kernels accept) and one plain server per test module (a start costs 1-2
minutes here)."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.vllm.errors import VllmNotInstalledError
from adapters.vllm.options import VllmOptions
from adapters.vllm.paths import require_python
from adapters.vllm.server import VllmServer
from engine.config import DEFAULT_MODELS
from engine.shipped import model_dir

REQUIRE_ENV = "SPECLEDGER_REQUIRE_VLLM"
TARGET, DRAFT = DEFAULT_MODELS["vllm"]


def require_vllm() -> Path:
    """vLLM's interpreter, or skip (fail under SPECLEDGER_REQUIRE_VLLM=1) saying why."""
    try:
        return require_python()
    except VllmNotInstalledError as exc:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{exc} ({REQUIRE_ENV}=1)")
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """vLLM's server on the wide target, plain decoding (prefix caching on), shared by a
    module's tests."""
    require_vllm()
    log = tmp_path_factory.mktemp("vllm") / "plain.log"
    with VllmServer(VllmOptions(model=model_dir(TARGET)), log) as server:
        yield server
