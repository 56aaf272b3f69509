"""`show` of an interval session: one row per interval with '-' where its line gives no
figure (never a made-up 0), the header's failures, and `--json`'s series."""

import json
from pathlib import Path

import pytest
from rich.console import Console

from adapters.logs.intervals.run import IntervalKind, IntervalLine
from eventlog.series import Point
from specledger.cli import main
from specledger.series_output import series_table
from tests.adapters.vllm.log.test_reader import TWO


def test_show_prints_each_interval_and_dashes_for_what_no_line_gives(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "two.log"
    log.write_bytes(TWO)
    db = str(tmp_path / "l.db")
    assert main(["import", "vllm", str(log), "--db", db]) == 0
    capsys.readouterr()
    assert main(["show", "2", "--db", db, "--json"]) == 0
    (iv,) = json.loads(capsys.readouterr().out)["intervals"]
    assert iv["kind"] == "spec" and iv["generation_tps"] is None and iv["drafted"] == 652
    assert main(["show", "2", "--db", db]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if "630/652" in ln)
    assert row.count(" - ") >= 5  # throughputs, requests, KV, prefix: not on this line


def test_the_engines_own_acceptance_rate_is_a_column() -> None:
    """SGLang prints an accept rate and no counts: the rate is shown, the counts are '-'."""
    iv = IntervalLine(2, IntervalKind.DECODE_BATCH, "2025-10-22 10:27:57", None,
                      mean_accept_len=2.17, draft_acceptance=0.54, generation_tps=178.86)
    console = Console(width=240, record=True)
    console.print(series_table([Point(1, 0.0, iv.payload())], "t"))
    row = next(line for line in console.export_text().splitlines() if "2.17" in line)
    assert [c.strip() for c in row.split("│")][10:13] == ["2.17", "54.0", "-"]
