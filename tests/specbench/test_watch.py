"""The watch suite in quick mode: every measurement runs on a real llama-server and lands
in the table, the results and the goals (the numbers of a quick run are not to quote)."""

from pathlib import Path

from tests.specbench.llama_quick import run_quick


def test_quick_run(tmp_path: Path) -> None:
    result, data = run_quick("watch", tmp_path)
    assert data["quick"] is True
    assert len(data["tok_s"]["without"]) == len(data["tok_s"]["with"]) == 1
    assert all(v > 0 for v in data["tok_s"]["without"] + data["tok_s"]["with"])
    lag = data["lag"]
    assert lag["requests"] > 0 and len(lag["ledger_lag_s"]) == lag["requests"]
    assert lag["summary"]["recorded"] == lag["requests"]
    assert 0 < lag["cpu_share"] < 2
    ring = data["ring"]
    assert ring["requests"] > 0 and ring["samples"]
    assert ring["summary"]["recorded"] == 0  # nothing fired at error level: nothing written
    assert [g.name for g in result.goals] == [
        "watch: log line to ledger", "watch: proving line to finding printed",
        "watch: ring mode memory flat", "watch: server tok/s kept"]
    assert "| last log line to session committed |" in result.table
