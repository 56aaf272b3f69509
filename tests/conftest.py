"""Fixtures for every test: a database URL on SQLite and on a throwaway PostgreSQL server.

The server starts once per test run, the first time a PostgreSQL case needs it, and every
case gets a fresh database of its own. Without server binaries the PostgreSQL cases skip,
unless SPECLEDGER_REQUIRE_POSTGRES=1 (as `make test` sets) makes that a failure.
"""

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from specbench.pg_cluster import PgCluster, PostgresMissingError, start_cluster

_NAMES = itertools.count(1)


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
