"""The fast whole-session read path returns exactly what `iter_events` returns (and only
the triggers asked for, when asked)."""

import pytest
from sqlalchemy import Engine

from eventlog import Recorder, UnknownSessionError, iter_events
from eventlog.reader import scan_events
from fsm.states import Trigger
from tests.eventlog.conftest import MakeRounds


def test_scan_equals_iter_events(engine: Engine, session_id: int,
                                 make_rounds: MakeRounds) -> None:
    with Recorder(engine, session_id) as rec:
        for ev in make_rounds(50):
            rec.append(ev)
        rec.end_unit()
    assert list(scan_events(engine, session_id, batch=7)) == list(iter_events(engine,
                                                                              session_id))
    assert list(scan_events(engine, session_id, upto_seq=40)) == list(
        iter_events(engine, session_id, upto_seq=40))
    wanted = {Trigger.COMMIT, Trigger.RESTORE}
    assert list(scan_events(engine, session_id, triggers=wanted, upto_seq=40)) == [
        e for e in iter_events(engine, session_id, upto_seq=40) if e.trigger in wanted]
    with pytest.raises(UnknownSessionError):
        scan_events(engine, 99)
