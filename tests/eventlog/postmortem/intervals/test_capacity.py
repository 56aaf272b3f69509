"""The KV cache full (a warning) and requests waiting or preempted (a note; a warning with
the cache full), from the stats lines' own figures."""

from eventlog.postmortem.finding import Kind, Severity
from tests.eventlog.postmortem.intervals.runs import findings, run_of, window


def test_a_full_cache_with_requests_waiting() -> None:
    run = run_of(window(1, kv_usage=0.5, running=4, waiting=0),
                 window(2, kv_usage=0.995, running=8, waiting=3))
    got = {f.kind: f for f in findings(run)}
    assert got[Kind.KV_CACHE_EXHAUSTED].severity is Severity.WARNING
    assert got[Kind.KV_CACHE_EXHAUSTED].numbers["kv_usage"] == 0.995
    assert got[Kind.REQUESTS_WAITING].severity is Severity.WARNING
    assert got[Kind.REQUESTS_WAITING].numbers["max_waiting"] == 3


def test_preemptions_with_room_left_are_a_note() -> None:
    run = run_of(window(1, kv_usage=0.6, running=2, waiting=0, extra={"preemptions": 2}))
    (f,) = findings(run)
    assert (f.kind, f.severity, f.numbers["preemptions"]) == (
        Kind.REQUESTS_WAITING, Severity.INFO, 2)


def test_room_and_no_queue_say_nothing() -> None:
    assert findings(run_of(window(1, kv_usage=0.98, running=2, waiting=0))) == []
