"""A batched session in the ledger: recorded to SQLite, it folds into the metrics the run
counted live, projects to each slot's live state at any seq, re-executes event for event,
agrees token for token with the sequential session, and its postmortem finds nothing
wrong, against a plain reference of either schedule."""

import json
from dataclasses import asdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import RunConfig, Schedule, Strategy
from engine.session import MemoryJournal, Session
from eventlog import open_db, project, scan_events
from eventlog.diff import diff_tokens
from eventlog.fold import TurnRecord, fold_log
from eventlog.postmortem import Severity, postmortem_session
from specledger.api import run_session
from specledger.cli.main import main

BATCHED = RunConfig(backend="sim", slots=4, schedule="batched", turns=2, prompt_tokens=64,
                    question_tokens=8, answer_tokens=40, acceptance=0.7, seed=5)


@pytest.fixture
def db(tmp_path: object) -> str:
    return f"sqlite:///{tmp_path}/ledger.db"


@pytest.mark.parametrize("strategy", [s for s in Strategy if s is not Strategy.NONE])
def test_a_batched_session_passes_the_postmortem_against_either_plain_reference(
        db: str, strategy: Strategy) -> None:
    config = BATCHED.replace(strategy=strategy)
    sid = run_session(config, db).session_id
    engine = open_db(db, create=False)
    for schedule in Schedule:
        ref = run_session(config.replace(drafter="none", schedule=schedule), db).session_id
        pm = postmortem_session(engine, sid, ref)
        assert not [f for f in pm.findings if f.severity is Severity.ERROR], pm.findings


@settings(max_examples=25, deadline=None)
@given(slots=st.integers(1, 6), strategy=st.sampled_from(list(Strategy)),
       replay=st.sampled_from(["reconstruct", "reverify"]),
       ties=st.sampled_from([0.0, 0.3]), drafter=st.sampled_from(["synthetic", "ngram-mod"]),
       draft_max=st.integers(1, 10), seed=st.integers(0, 2**31))
def test_the_fold_of_a_batched_log_is_the_live_metrics_and_slots(
        slots: int, strategy: Strategy, replay: str, ties: float, drafter: str,
        draft_max: int, seed: int) -> None:
    """Each slot's times on the shared clock are what its events' times say (a round from
    the slot's previous event to its commit), so the one fold counts them again exactly."""
    config = BATCHED.replace(slots=slots, strategy=strategy, replay_policy=replay,
                             tie_flip_rate=ties, drafter=drafter, draft_max=draft_max,
                             seed=seed, ctx_checkpoint_every=16)
    journal = MemoryJournal()
    session = Session(config, journal)
    live = session.run()
    closed: list[TurnRecord] = []
    fold_log(journal.events, closed.append)
    by_turn = {(m.slot, m.turn): asdict(m) for m in live}
    assert {(r.slot, r.turn): asdict(r.stats) for r in closed} == by_turn
    views = project(journal.events)
    for s in session.slots:
        v = views[s.id]
        assert (v.tokens, v.position, v.digest) == (s.tokens, s.state.position,
                                                    session.backend.digest(s.state))


def test_replay_at_rerun_and_diff_work_on_a_batched_session(
        db: str, capsys: pytest.CaptureFixture[str]) -> None:
    sid = run_session(BATCHED, db).session_id
    seq_sid = run_session(BATCHED.replace(schedule="sequential"), db).session_id
    engine = open_db(db, create=False)
    events = list(scan_events(engine, sid))
    mid = events[len(events) // 2].seq
    assert main(["replay", str(sid), "--at", str(mid), "--db", db, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    expected = project(events, at=mid)
    assert {v["slot"]: v["tokens"] for v in doc["slots"]} == {
        n: v.tokens for n, v in expected.items()}
    assert main(["replay", str(sid), "--rerun", "--db", db, "--json"]) == 0
    rerun = json.loads(capsys.readouterr().out)
    assert rerun["reproduced"] is True and rerun["compared"] == len(events)
    assert main(["diff", str(sid), str(rerun["session"]), "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["identical"] is True
    # across schedules the events interleave differently; the tokens are the same
    tokens = diff_tokens(scan_events(engine, seq_sid), scan_events(engine, sid))
    assert tokens.tokens is not None and tokens.tokens.first is None
    assert main(["diff", str(seq_sid), str(sid), "--tokens", "--db", db, "--json"]) == 0
