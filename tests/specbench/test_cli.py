"""The cli suite: a quick run times each command as a whole process and judges the
issue's goals by the median."""

import json
from pathlib import Path

from specbench import BenchOptions, run_suite


def test_quick_suite_times_each_command_and_judges_the_goals(tmp_path: Path) -> None:
    opts = BenchOptions(out=tmp_path, db=str(tmp_path / "bench.db"), quick=True)
    result = run_suite("cli", opts)
    doc = json.loads((tmp_path / "cli" / "results.json").read_text())
    timed = {t["command"]: t for t in doc["timed"]}
    assert list(timed) == ["python -c pass", "specledger --help", "specledger sessions",
                           "specledger show 1", "specledger postmortem 1"]
    for t in timed.values():
        assert t["runs"] == 3 and 0 < t["min_s"] <= t["median_s"]
    assert [g.name for g in result.goals] == [
        "`specledger --help` start", "`specledger sessions` start", "`specledger show 1` start"]
    commands = ["specledger --help", "specledger sessions", "specledger show 1"]
    for goal, command in zip(result.goals, commands, strict=True):
        assert goal.met == (timed[command]["median_s"] < float(goal.target.split()[1]))
