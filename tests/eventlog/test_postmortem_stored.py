"""The postmortem of a stored session reads only what its detectors ask for from the
database, and finds exactly what the same detectors find in the session's whole events."""

from dataclasses import replace

import pytest

from engine.config import RunConfig
from eventlog import Recorder, create_session, open_db
from eventlog.postmortem import Kind, analyze, postmortem_session
from eventlog.reader import get_session, scan_events
from fsm.states import Trigger
from specledger.api import run_session
from tests.eventlog.sim import sim_events

CASES = {
    "stray tokens and livelocks": RunConfig(eog_policy="legacy", replay_policy="reverify",
                                            tie_flip_rate=0.3, acceptance=0.9, turns=3,
                                            seed=3),
    "no rollback": RunConfig(strategy="none", acceptance=0.6, turns=2, seed=5),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_stored_postmortem_equals_the_events_one(db_url: str, name: str) -> None:
    sid = run_session(CASES[name], db_url).session_id
    engine = open_db(db_url, create=False)
    stored = postmortem_session(engine, sid)
    whole, n = analyze(list(scan_events(engine, sid)), get_session(engine, sid).config)
    assert stored.findings, name  # the case plants something to find
    assert [f.to_dict() for f in stored.findings] == [f.to_dict() for f in whole]
    assert stored.events == n


def test_the_stored_postmortem_against_a_reference_equals_the_events_one(db_url: str) -> None:
    config = CASES["no rollback"]
    sid = run_session(config, db_url).session_id
    ref = run_session(replace(config, drafter="none"), db_url).session_id
    engine = open_db(db_url, create=False)
    stored = postmortem_session(engine, sid, ref)
    whole, _ = analyze(list(scan_events(engine, sid)), get_session(engine, sid).config,
                       scan_events(engine, ref), ref)
    assert Kind.OUTPUT_MISMATCH in {f.kind for f in stored.findings}
    assert [f.to_dict() for f in stored.findings] == [f.to_dict() for f in whole]


def test_a_storms_cycle_is_read_back_from_the_database(db_url: str) -> None:
    """No guard names an unguarded storm's cycle: the postmortem reads the first storm
    round's triggers back from the log, and names what the whole events show."""
    events, config = sim_events(replay_policy="reverify", tie_flip_rate=0.3)
    unguarded = [e for e in events if e.trigger is not Trigger.LIVELOCK]
    engine = open_db(db_url, True)
    sid = create_session(engine, config=config, backend="sim", seeds={}, code_version="test")
    with Recorder(engine, sid) as rec:
        for ev in unguarded:
            rec.append(ev)
            rec.end_unit()
    stored = {f.kind: f for f in postmortem_session(engine, sid).findings}
    whole = {f.kind: f for f in analyze(unguarded, config)[0]}
    storm = stored[Kind.RESTORE_STORM]
    assert storm.numbers["cycle"].startswith("verify -> reject -> restore")
    assert storm.to_dict() == whole[Kind.RESTORE_STORM].to_dict()
