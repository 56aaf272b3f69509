"""The backlog suite: its rotation is logrotate's, its parts cover the copies, and in quick
mode a real llama-server's run, copied into a backlog rotated three times under a watch,
is recorded request for request (the numbers of a quick run are not to quote)."""

from pathlib import Path

import pytest

from specbench.backlog import logrotate, parts_of
from tests.specbench.llama_quick import run_quick


def test_logrotate_shifts_the_numbered_copies(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    for name, text in (("server.log", "now"), ("server.log.1", "one"),
                       ("server.log.2", "two"), ("server.log.gz", "other")):
        (tmp_path / name).write_text(text)
    logrotate(log)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        "server.log": "", "server.log.1": "now", "server.log.2": "one", "server.log.3": "two",
        "server.log.gz": "other"}


@pytest.mark.parametrize("copies,n,parts", [(10, 4, [3, 3, 2, 2]), (4, 4, [1, 1, 1, 1]),
                                            (9, 1, [9])])
def test_parts(copies: int, n: int, parts: list[int]) -> None:
    assert parts_of(copies, n) == parts


def test_quick_run(tmp_path: Path) -> None:
    result, data = run_quick("backlog", tmp_path)
    caught = data["catchup"]
    assert data["per_copy"] > 0 and len(caught["parts"]) == 4
    assert caught["recorded"] == caught["expected"] == data["distinct_keys"]
    assert caught["expected"] == (caught["copies"] + 1) * data["per_copy"]  # the first run too
    assert data["as_answered"] and data["unfinished"] == 0
    assert caught["summary"]["gaps"] == 0
    assert caught["summary"]["switches"].count("rotated") == 3
    assert [g.met for g in result.goals] == [True]
