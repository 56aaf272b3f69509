"""`show`'s turns (specledger.api.session_turns): read from the turn summaries where they
tell the session, folded from its events where not, the same turns either way."""

from typing import Any

import pytest
from sqlalchemy import delete

from engine.config import RunConfig
from eventlog import SessionStatus, create_session, open_db, scan_events
from eventlog.recorder import Recorder
from eventlog.schema import turns
from fsm.states import Trigger
from specledger.api import run_session, session_turns
from tests.eventlog.sim import sim_events, turn_profiles

TWO_SLOTS = RunConfig(turns=2, slots=2, schedule="batched", prompt_tokens=64,
                      question_tokens=8, answer_tokens=60, seed=2)


def _read(db: str, sid: int) -> dict[str, Any]:
    t = session_turns(open_db(db, create=False), sid)
    return {"ended": [m.to_dict() for m in t.ended], "partial": [m.to_dict() for m in t.partial],
            "profiles": {k: p.to_dict() for k, p in t.profiles.items()}}


def _cut(db: str) -> int:
    """A session recorded into `db` up to the middle of its second turn, closed failed."""
    events, _ = sim_events(turns=3)
    second_end = [e.seq for e in events if e.trigger is Trigger.END_TURN][1]
    engine = open_db(db, create=True)
    sid = create_session(engine, config={}, backend="sim", seeds={}, code_version="test")
    with Recorder(engine, sid) as rec:
        for ev in events[: second_end - 20]:
            rec.append(ev)
            rec.end_unit()
        rec.close(SessionStatus.FAILED)
    return sid


@pytest.mark.parametrize("kind", ["finished", "cut"])
def test_summaries_and_the_fold_give_the_same_turns(db_url: str, kind: str) -> None:
    sid = run_session(TWO_SLOTS, db_url).session_id if kind == "finished" else _cut(db_url)
    read = _read(db_url, sid)
    assert len(read["ended"]) == (4 if kind == "finished" else 1)
    assert len(read["partial"]) == (0 if kind == "finished" else 1)
    events = scan_events(open_db(db_url, create=False), sid)
    assert read["profiles"] == {k: p.to_dict() for k, p in turn_profiles(events).items()}
    with open_db(db_url, create=True).begin() as conn:  # as an older specledger left it
        conn.execute(delete(turns).where(turns.c.session_id == sid))
    assert _read(db_url, sid) == read
