"""Fixtures for every test: a database URL on SQLite and on a throwaway PostgreSQL server.

The server starts once per test run, the first time a PostgreSQL case needs it, and every
case gets a fresh database of its own. Without server binaries the PostgreSQL cases skip,
unless SPECLEDGER_REQUIRE_POSTGRES=1 (as `make test` sets) makes that a failure.

`--device cuda` runs the device-aware tests (the Triton kernels, the torch backend's
speculative sessions) on the GPU; the default, cpu, runs them as before. Either way they
read the choice from the `torch_device` fixture.
"""

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from specbench.pg_cluster import PgCluster, PostgresMissingError, start_cluster

if TYPE_CHECKING:  # torch is imported where a test needs it: most runs never do
    import torch

_NAMES = itertools.count(1)
DEVICES = ("cpu", "cuda")


def pytest_addoption(parser: pytest.Parser) -> None:
    """--device: where the device-aware tests put their models and tensors."""
    parser.addoption("--device", choices=DEVICES, default="cpu",
                     help="torch device for the kernel and torch-backend tests (default: cpu)")


def pytest_configure(config: pytest.Config) -> None:
    """Refuse a --device cuda run that could not mean what it says, in one line, before
    anything is collected (rather than a failure in every test that asks for the GPU)."""
    if config.getoption("device") != "cuda":
        return
    from engine.errors import BackendError
    from engine.hybrid.device import resolve_device
    from speckernels.backend import interpreter_enabled

    if interpreter_enabled():
        raise pytest.UsageError("--device cuda runs the Triton kernels compiled; unset "
                                "TRITON_INTERPRET (it is 1) to run them on the GPU")
    try:
        resolve_device("cuda")
    except BackendError as exc:
        raise pytest.UsageError(f"--device cuda: {exc}") from None


@pytest.fixture(scope="session")
def torch_device(pytestconfig: pytest.Config) -> "torch.device":
    """The torch device --device names (cpu unless asked), checked by pytest_configure."""
    from engine.hybrid.device import resolve_device

    return resolve_device(pytestconfig.getoption("device"))


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """The test run's PostgreSQL server (unix socket only), stopped at the end."""
    try:
        cluster = start_cluster()
    except PostgresMissingError as exc:
        if os.environ.get("SPECLEDGER_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"SPECLEDGER_REQUIRE_POSTGRES=1: {exc}")
        pytest.skip(str(exc))
    with cluster:
        yield cluster


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a test's ledger lives: a SQLite file that does not exist yet, or a new empty
    PostgreSQL database."""
    if request.param == "sqlite":
        yield str(tmp_path / "log.db")
        return
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    name = f"t{os.getpid()}_{next(_NAMES)}"
    yield cluster.create_database(name)
    cluster.drop_database(name)
