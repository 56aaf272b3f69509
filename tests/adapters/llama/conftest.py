"""Fixtures of the llama.cpp tests: the built `llama-server` (skipped when absent, failed
when SPECLEDGER_REQUIRE_LLAMA=1, as `make test` sets), the shipped models exported to GGUF
once per session, and our target model loaded once."""

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.llama.errors import LlamaNotBuiltError
from adapters.llama.gguf.export import export_gguf
from adapters.llama.server.options import ServerOptions
from adapters.llama.server.paths import require_converter, require_server
from adapters.llama.server.process import LlamaServer

REQUIRE_ENV = "SPECLEDGER_REQUIRE_LLAMA"
PRE_MTP_BUILD = "0.3.21"  # the newest build before draft-mtp: `make llama-builds` builds it
TARGET, DRAFT = "shipped:target", "shipped:draft"


@dataclass(frozen=True)
class Ggufs:
    """The shipped target (with its MTP head) and draft model as f32 GGUF files."""

    target: Path
    draft: Path


def require_llama(check: Callable[[], Path]) -> Path:
    """`check()`'s path, or skip (fail under SPECLEDGER_REQUIRE_LLAMA=1) saying why."""
    try:
        return check()
    except LlamaNotBuiltError as exc:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{exc} ({REQUIRE_ENV}=1)")
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    """The llama-server binary."""
    return require_llama(require_server)


@pytest.fixture(scope="session")
def ggufs(llama_server_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Ggufs:
    """Both shipped models exported with our converter step, once per session."""
    require_llama(require_converter)
    folder = tmp_path_factory.mktemp("gguf")
    # Each export is a child process that mostly imports torch: both at once.
    with ThreadPoolExecutor(2) as pool:
        target = pool.submit(export_gguf, TARGET, folder / "target.gguf")
        draft = pool.submit(export_gguf, DRAFT, folder / "draft.gguf")
        return Ggufs(target.result(), draft.result())


@pytest.fixture(scope="session")
def target_checkpoint() -> Any:
    """Our target checkpoint (f32, CPU), loaded once."""
    from engine.hybrid.loader import load_checkpoint

    return load_checkpoint(TARGET)


@pytest.fixture(scope="module")
def plain_server(ggufs: Ggufs, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[LlamaServer]:
    """A llama-server on the target, no drafter, shared by a module's tests."""
    log = tmp_path_factory.mktemp("llama") / "plain.log"
    with LlamaServer(ServerOptions(model=ggufs.target, verbose=False), log) as server:
        yield server
