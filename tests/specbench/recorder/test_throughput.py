"""The recorder suite's throughput numbers, from synthetic rounds: each rate is the events
the ledger holds over a time within the call's, and the size is the ledger's on disk."""

import time
from pathlib import Path

import pytest

from eventlog import count_events, list_sessions, open_db
from specbench.recorder.throughput import UNIT, synthetic_events, throughput


def test_synthetic_events_are_whole_rounds() -> None:
    events = synthetic_events(100)
    assert len(events) == 96 and len(events) % UNIT == 0
    assert [e.seq for e in events] == list(range(96))


def _stored(path: Path) -> int:
    """The events of the ledger's one session."""
    engine = open_db(str(path), False)
    [info] = list_sessions(engine)
    n = count_events(engine, info.id)
    engine.dispose()
    return n


def test_throughput_measures_rates_and_size(tmp_path: Path) -> None:
    began = time.perf_counter()
    r = throughput(600, tmp_path)
    outside = time.perf_counter() - began  # every timed part lies within it
    size = sum(p.stat().st_size for p in tmp_path.glob("group.db*"))
    n = r["events"]
    assert n == _stored(tmp_path / "group.db") == 600
    assert r["commit_per_unit"]["events"] == _stored(tmp_path / "per_unit.db") > 0
    for rate in (r["group_commit"]["events_per_s"], r["null_recorder_events_per_s"],
                 r["read_events_per_s"], r["projection_events_per_s"]):
        assert rate >= n / outside
    assert r["commit_per_unit"]["rows_per_s"] >= r["commit_per_unit"]["events"] / outside
    assert r["db_bytes_per_event"] * n == pytest.approx(size)
