"""The recorder suite's throughput numbers, from synthetic rounds."""

from pathlib import Path

from specbench.recorder_throughput import UNIT, synthetic_events, throughput


def test_synthetic_events_are_whole_rounds() -> None:
    events = synthetic_events(100)
    assert len(events) == 96 and len(events) % UNIT == 0
    assert [e.seq for e in events] == list(range(96))


def test_throughput_measures_rates_and_size(tmp_path: Path) -> None:
    r = throughput(600, tmp_path)
    assert r["events"] == 600
    assert r["group_commit"]["events_per_s"] > 0
    assert r["commit_per_unit"]["rows_per_s"] > 0
    assert r["projection_events_per_s"] > 0
    assert r["db_bytes_per_event"] > 0
