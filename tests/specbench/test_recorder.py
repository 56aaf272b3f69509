"""The recorder suite: a quick run whose recorded sessions are in the benchmark's log with
every event."""

import json
from pathlib import Path

from eventlog import SessionStatus, count_events, get_session, open_db
from specbench import BenchOptions, run_suite


def test_quick_suite_records_its_runs_into_the_bench_log(tmp_path: Path) -> None:
    opts = BenchOptions(out=tmp_path, db=str(tmp_path / "bench.db"), quick=True)
    result = run_suite("recorder", opts)
    doc = json.loads((tmp_path / "recorder" / "results.json").read_text())
    assert doc["throughput"]["group_commit"]["events_per_s"] > 0
    assert doc["throughput"]["db_bytes_per_event"] > 0
    for name in ("recording_overhead.png", "recording_overhead.svg"):
        assert (tmp_path / "recorder" / name).is_file()
    [goal] = result.goals
    assert goal.name == "recording overhead, real engine"

    engine = open_db(opts.db, create=False)
    for backend in ("sim", "torch"):
        run = doc["overhead"][backend]
        assert run["recorder_s"]["median"] > 0 and run["seconds_on"]["min"] > 0
        logged = run["bench_session"]
        assert logged["id"] in result.sessions
        info = get_session(engine, logged["id"])
        assert info.backend == backend
        assert info.status is SessionStatus.FINISHED
        assert logged["events"] > 0
        assert count_events(engine, logged["id"]) == logged["events"] == info.events
    engine.dispose()
