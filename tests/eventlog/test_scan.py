"""The one read path returns exactly the events recorded, in seq order (through a bound,
and only the triggers asked for, when asked), whatever its fetch size."""

import pytest
from sqlalchemy import Engine

from eventlog import Recorder, UnknownSessionError, scan_events
from fsm.states import Trigger
from tests.eventlog.conftest import MakeRounds


def test_scan_returns_the_recorded_events(engine: Engine, session_id: int,
                                          make_rounds: MakeRounds) -> None:
    written = make_rounds(50)
    with Recorder(engine, session_id) as rec:
        for ev in written:
            rec.append(ev)
        rec.end_unit()
    assert list(scan_events(engine, session_id, batch=7)) == written
    assert list(scan_events(engine, session_id, upto_seq=40)) == [
        e for e in written if e.seq <= 40]
    wanted = {Trigger.COMMIT, Trigger.RESTORE}
    assert list(scan_events(engine, session_id, triggers=wanted, upto_seq=40)) == [
        e for e in written if e.seq <= 40 and e.trigger in wanted]
    with pytest.raises(UnknownSessionError):
        scan_events(engine, 99)
