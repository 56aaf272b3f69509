"""The scale suite: a quick run analyses both sessions in processes of their own (`show`
among them) and keeps its time and memory goals."""

import json
from pathlib import Path

from specbench import BenchOptions, run_suite
from specbench.scale import QUICK


def test_quick_run_analyses_both_sessions_and_keeps_its_goals(tmp_path: Path) -> None:
    result = run_suite("scale", BenchOptions(out=tmp_path, db=str(tmp_path / "b.db"),
                                             quick=True))
    doc = json.loads((tmp_path / "scale" / "results.json").read_text())
    assert (doc["timed_events"], doc["large_events"]) == (QUICK.timed, QUICK.large)
    for runs, n in ((doc["timed"], QUICK.timed), (doc["large"], QUICK.large)):
        assert set(runs) == {"projection", "postmortem", "diff", "show"}
        assert runs["postmortem"]["found"]["events"] == n
        assert runs["postmortem"]["found"]["findings"]["eog_stray_tokens"] == "error"
        assert runs["diff"]["found"]["identical"] is True
        assert runs["projection"]["found"]["slots"] == 1
        assert runs["show"]["found"]["status"] == 0
        assert all(0 < r["peak_rss_mb"] < 500 and r["cpu_s"] > 0 for r in runs.values())
    assert [g.target for g in result.goals] == ["<= 3 s", "<= 3 s", "<= 0.5 s",
                                                "peak RSS < 500 MB"]
