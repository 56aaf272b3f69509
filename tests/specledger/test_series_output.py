"""`show` of an interval session: one row per interval with '-' where its line gives no
figure (never a made-up 0), the header's failures, and `--json`'s series."""

import json
from pathlib import Path

import pytest

from specledger.cli import main
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
