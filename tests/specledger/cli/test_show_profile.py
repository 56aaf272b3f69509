"""`specledger show` reports, per turn, the mean accepted length per round and the
acceptance rate at each draft position, in its table and in --json."""

import json
import re
from pathlib import Path

import pytest

from engine.config import RunConfig
from eventlog import open_db, scan_events
from fsm.states import Trigger
from specledger.api import run_session
from specledger.cli.main import main


def _rounds_from_events(db: str, session_id: int) -> dict[int, list[tuple[int, int]]]:
    """Per turn, each speculative round's (drafted, accepted): the drafts its first
    verification checked and the drafts its commit accepted, read off the events."""
    out: dict[int, list[tuple[int, int]]] = {}
    drafted: dict[tuple[int, int], int] = {}
    for e in scan_events(open_db(db, create=False), session_id):
        if e.trigger is Trigger.VERIFY:
            drafted[(e.turn, e.round)] = e.payload["drafted"]
        elif e.trigger is Trigger.COMMIT and (e.turn, e.round) in drafted:
            out.setdefault(e.turn, []).append((drafted[(e.turn, e.round)],
                                               e.payload["accepted"]))
    return out


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
    rounds = _rounds_from_events(db, result.session_id)
    for row in turns:
        verified = rounds[row["turn"]]
        accepted = sum(a for _, a in verified)
        assert accepted > 0 and any(a < k for k, a in verified)  # some rounds rejected
        # llama-server's definitions: 1 + accepted drafts per verified round, and the
        # share of verified rounds that accepted at least i drafts, i = 1..longest draft
        assert row["mean_accept_len"] == pytest.approx(1 + accepted / len(verified))
        longest = max(k for k, _ in verified)
        assert row["acc_per_pos"] == pytest.approx(
            [sum(a >= i for _, a in verified) / len(verified) for i in range(1, longest + 1)])
    assert main(["show", str(result.session_id), "--db", db]) == 0
    out = capsys.readouterr().out
    assert "mean len" in out and "acc % at 1..k" in out
    for row in turns:
        rates = "/".join(f"{100 * r:.0f}" for r in row["acc_per_pos"])
        assert re.search(rf"\b{row['mean_accept_len']:.2f}\s*│\s*{rates}\b", out), rates
