"""An interval run recorded as a session: interval events hold exactly the line's figures,
requests become turns, a run that died is a failed session, and the series reads back."""

from pathlib import Path

from adapters.logs.intervals.record import Source, record_run
from adapters.logs.intervals.run import (
    Failure,
    FailureKind,
    IntervalKind,
    IntervalLine,
    RequestLine,
    RunEnding,
    ServerRun,
)
from eventlog import open_db
from eventlog.reader import get_session
from eventlog.schema import SessionStatus
from eventlog.series import SERIES, interval_series
from fsm.payload_schema import check_events
from fsm.states import Trigger
from specledger.api import session_turns
from specledger.interval_session import store_interval_run
from specledger.observed import UnitJournal

SRC = Source("server.log", "0" * 64, 1)


def _run() -> ServerRun:
    run = ServerRun("vllm", 0, 1, 40, pid=7, method="mtp", num_spec_tokens=2)
    run.intervals = [
        IntervalLine(10, IntervalKind.ENGINE, "05-08 16:25:09", 100.0, 0, 2.5, 74.7, 1, 0,
                     0.074, 0.0, 2.87, 48.9, 157.19, 489, 1572, [0.74, 0.473], 0.311),
        IntervalLine(30, IntervalKind.ENGINE, "05-08 16:25:19", 110.0, 0, 0.0, 72.0, 1, 0,
                     0.078, 0.0),
    ]
    run.requests = [RequestLine(5, None, None, 200, "POST", "/v1/chat/completions"),
                    RequestLine(20, None, None, 500, "POST", "/v1/chat/completions")]
    return run


def test_intervals_and_requests_in_log_order_with_typed_payloads() -> None:
    journal = UnitJournal()
    rec = record_run(_run(), SRC, journal)
    assert [e.trigger for e in journal.events] == [
        Trigger.START_TURN, Trigger.END_TURN, Trigger.INTERVAL, Trigger.START_TURN,
        Trigger.END_TURN, Trigger.INTERVAL]
    assert check_events(journal.events) == []
    first, second = (e for e in journal.events if e.trigger is Trigger.INTERVAL)
    assert first.payload["acc_per_pos"] == [0.74, 0.473] and first.t == 0.0
    assert second.payload["mean_accept_len"] is None  # no SpecDecoding line: nothing made up
    assert second.t == 10.0
    assert rec.config["series"] == SERIES and rec.config["draft_max"] == 2
    assert rec.error is None


def test_a_run_that_died_is_a_failed_session_and_its_series_reads_back(tmp_path: Path) -> None:
    run = _run()
    run.ending = RunEnding.DIED
    run.failures = [Failure(FailureKind.ENGINE_DIED, 39, None, "RuntimeError: boom")]
    db = f"sqlite:///{tmp_path / 'l.db'}"
    sid, _ = store_interval_run(db, run, SRC)
    engine = open_db(db, create=False)
    info = get_session(engine, sid)
    assert info.status is SessionStatus.FAILED
    assert info.config["source"]["failures"][0]["message"] == "RuntimeError: boom"
    series = interval_series(engine, sid)
    assert [p.interval["line"] for p in series] == [10, 30]
    assert [p.interval["generation_tps"] for p in series] == [74.7, 72.0]
    ended = session_turns(engine, sid).ended
    assert [m.generated_tokens for m in ended] == [None, None]  # the log shows no counts
