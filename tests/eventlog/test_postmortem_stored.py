"""The postmortem of a stored session reads only what its detectors ask for from the
database, and finds exactly what the same detectors find in the session's whole events."""

from dataclasses import replace

import pytest

from engine.config import RunConfig
from eventlog import open_db
from eventlog.postmortem import Kind, analyze, postmortem_session
from eventlog.reader import get_session, iter_events
from specledger.api import run_session

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
    whole, n = analyze(iter_events(engine, sid), get_session(engine, sid).config)
    assert stored.findings, name  # the case plants something to find
    assert [f.to_dict() for f in stored.findings] == [f.to_dict() for f in whole]
    assert stored.events == n


def test_the_stored_postmortem_against_a_reference_equals_the_events_one(db_url: str) -> None:
    config = CASES["no rollback"]
    sid = run_session(config, db_url).session_id
    ref = run_session(replace(config, drafter="none"), db_url).session_id
    engine = open_db(db_url, create=False)
    stored = postmortem_session(engine, sid, ref)
    whole, _ = analyze(iter_events(engine, sid), get_session(engine, sid).config,
                       iter_events(engine, ref), ref)
    assert Kind.OUTPUT_MISMATCH in {f.kind for f in stored.findings}
    assert [f.to_dict() for f in stored.findings] == [f.to_dict() for f in whole]
