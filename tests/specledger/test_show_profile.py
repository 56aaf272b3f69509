"""`specledger show` reports, per turn, the mean accepted length per round and the
acceptance rate at each draft position, in its table and in --json."""

import json
from pathlib import Path

import pytest

from engine.config import RunConfig
from specledger.api import run_session
from specledger.cli import main


def test_show_reports_the_draft_profile(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    config = RunConfig(backend="sim", turns=2, answer_tokens=48, prompt_tokens=48,
                       drafter="synthetic", acceptance=0.8, draft_max=4, seed=5)
    result = run_session(config, db)
    capsys.readouterr()
    assert main(["show", str(result.session_id), "--db", db, "--json"]) == 0
    turns = json.loads(capsys.readouterr().out)["turns"]
    assert len(turns) == 2
    for row, m in zip(turns, result.turns, strict=True):
        rates = row["acc_per_pos"]
        assert len(rates) == 4 and 1.0 <= row["mean_accept_len"] <= 5.0
        # Every accepted draft is counted at one position: the rates add up to the mean.
        assert sum(rates) == pytest.approx(row["mean_accept_len"] - 1)
        assert m.accepted > 0
    assert main(["show", str(result.session_id), "--db", db]) == 0
    out = capsys.readouterr().out
    assert "mean len" in out and "acc % at 1..k" in out
