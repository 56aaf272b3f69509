"""Turn summaries: the recorder writes one per ended turn with its END_TURN, and a reader
takes them only where they tell the whole session, or the whole of it but its tail."""

from pathlib import Path

from sqlalchemy import Engine, delete, text

from engine.config import RunConfig
from eventlog import SessionStatus, create_session, open_db, scan_events
from eventlog.fold import fold_log
from eventlog.recorder import Recorder
from eventlog.schema import turns
from eventlog.turn_summaries import read_summaries
from fsm.event import Event
from fsm.states import Trigger
from specledger.api import run_session
from tests.eventlog.sim import sim_events

TWO_SLOTS = RunConfig(turns=2, slots=2, schedule="batched", prompt_tokens=64,
                      question_tokens=8, answer_tokens=60, seed=2)


def _record(engine: Engine, events: list[Event], status: SessionStatus) -> int:
    """`events` recorded as a session of their own, each its own unit, closed `status`."""
    sid = create_session(engine, config={}, backend="sim", seeds={}, code_version="test")
    with Recorder(engine, sid) as rec:
        for ev in events:
            rec.append(ev)
            rec.end_unit()
        rec.close(status)
    return sid


def test_each_ended_turn_is_summarised_as_the_fold_closes_it(db_url: str) -> None:
    sid = run_session(TWO_SLOTS, db_url).session_id
    engine = open_db(db_url, create=False)
    stored = read_summaries(engine, sid)
    assert stored is not None and stored.open_after is None
    events = list(scan_events(engine, sid))
    closed: list = []
    fold_log(events, closed.append)
    assert [(r.slot, r.turn, r.metrics, r.profile.to_dict()) for r in stored.ended] == [
        (r.slot, r.turn, r.metrics, r.profile.to_dict()) for r in closed]
    assert len(stored.ended) == 4 and len({r.slot for r in stored.ended}) == 2


def test_a_session_cut_inside_a_turn_leaves_its_tail_to_fold(db_url: str) -> None:
    events, _ = sim_events()
    ends = [e.seq for e in events if e.trigger is Trigger.END_TURN]
    assert len(ends) == 2
    engine = open_db(db_url, create=True)
    sid = _record(engine, events[: ends[1] - 10], SessionStatus.FAILED)
    stored = read_summaries(engine, sid)
    assert stored is not None
    assert [r.turn for r in stored.ended] == [1] and stored.open_after == ends[0]


def test_summaries_that_miss_events_are_not_read(db_url: str) -> None:
    """A session whose ended turns are not all summarised (here: one row lost) cannot be
    told from them; one an older writer recorded (no rows) is all tail."""
    sid = run_session(TWO_SLOTS, db_url).session_id
    engine = open_db(db_url, create=True)
    with engine.begin() as conn:
        first = conn.scalar(turns.select().with_only_columns(turns.c.end_seq)
                            .where(turns.c.session_id == sid).order_by(turns.c.end_seq))
        conn.execute(delete(turns).where(turns.c.end_seq == first))
    assert read_summaries(engine, sid) is None
    with engine.begin() as conn:
        conn.execute(delete(turns).where(turns.c.session_id == sid))
    stored = read_summaries(engine, sid)
    assert stored is not None and (stored.ended, stored.open_after) == ([], 0)


def test_a_ledger_without_the_table_is_read_and_gains_it_at_its_next_writer(
        tmp_path: Path) -> None:
    db = str(tmp_path / "old.db")
    sid = run_session(TWO_SLOTS, db).session_id
    with open_db(db, create=True).begin() as conn:
        conn.execute(text("DROP TABLE turns"))
    assert read_summaries(open_db(db, create=False), sid) is None
    later = run_session(TWO_SLOTS, db).session_id
    stored = read_summaries(open_db(db, create=False), later)
    assert stored is not None and len(stored.ended) == 4
