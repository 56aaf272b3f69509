"""A backend written outside the engine (`tests.engine.double`) against the state-
operations protocol alone: its sessions are recorded, projected, replayed to any seq and
post-mortemed like the sim's, and a restore that corrupts the state is named for the
invariant it breaks."""

import json
from pathlib import Path

import pytest

from engine.config import RunConfig, Strategy
from eventlog import open_db, project, scan_events
from eventlog.postmortem import Kind, postmortem_session
from fsm.invariants import Invariant
from fsm.states import Trigger
from specledger.api import run_session
from specledger.cli.main import main
from tests.engine.double import VOCAB, DoubleBackend, chain


class _Questions:
    """The workload, handed to the session beside the backend."""

    def question(self, slot: int, turn: int) -> list[int]:
        return [(slot * 11 + turn * 5 + i) % VOCAB for i in range(24 if turn == 1 else 6)]


def _record(db: str, strategy: Strategy, backend: DoubleBackend) -> int:
    config = RunConfig(strategy=strategy, drafter="synthetic", acceptance=0.6, turns=3,
                       slots=2, max_answer_tokens=40, seed=2)
    return run_session(config, db, backend=backend, conversation=_Questions()).session_id


@pytest.mark.parametrize(
    "strategy", [Strategy.CHECKPOINT, Strategy.PER_TOKEN, Strategy.INPUT_REPLAY])
def test_double_session_records_replays_and_passes_the_postmortem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], strategy: Strategy,
) -> None:
    db = str(tmp_path / "double.db")
    sid = _record(db, strategy, DoubleBackend())
    engine = open_db(db, create=False)
    events = list(scan_events(engine, sid))
    assert {Trigger.REJECT, Trigger.COMMIT, Trigger.END_TURN} <= {e.trigger for e in events}
    for view in project(events).values():  # the log's state is the double's own truth
        assert view.digest == f"{chain(0, view.tokens[:view.position]):016x}"
        assert view.turn == 3 and not view.violations
    mid = len(events) // 2
    assert main(["replay", str(sid), "--db", db, "--at", str(mid), "--json"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    at_mid = project(events, at=mid)
    assert replayed["seq"] == mid
    assert [(s["tokens"], s["digest"]) for s in replayed["slots"]] == [
        (v.tokens, v.digest) for v in at_mid.values()]
    assert postmortem_session(engine, sid).findings == []


def test_a_corrupting_restore_is_named_by_the_postmortem(tmp_path: Path) -> None:
    db = str(tmp_path / "double.db")
    sid = _record(db, Strategy.CHECKPOINT, DoubleBackend(corrupt_restore=True))
    engine = open_db(db, create=False)
    broken = {e.payload["invariant"] for e in scan_events(engine, sid)
              if e.trigger is Trigger.INVARIANT_VIOLATION}
    assert broken == {Invariant.STATE_TRUTH.value}
    (finding,) = postmortem_session(engine, sid).findings
    assert finding.kind is Kind.STATE_CONTAMINATION
    assert finding.numbers["state_truth_violations"] > 0
    assert "state-truth audit" in finding.explanation
