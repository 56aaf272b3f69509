"""The KV cache full (a warning), a hybrid's Mamba state pool full (a warning), and requests
waiting or preempted (a note; a warning with either full), from the stats lines' own
figures."""

from eventlog.postmortem.finding import Kind, Severity
from tests.eventlog.postmortem.intervals.runs import batch, findings, run_of, window


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


def test_a_full_mamba_state_pool_with_requests_waiting() -> None:
    """SGLang's hybrid decode line: `mamba num: 20, mamba usage: 1.00, #queue-req: 6`."""
    run = run_of(batch(1, kv_usage=0.14, running=20, waiting=6,
                       extra={"mamba_num": 20, "mamba_usage": 1.0}),
                 batch(2, kv_usage=0.14, running=12, waiting=0,
                       extra={"mamba_num": 12, "mamba_usage": 0.6}))
    got = {f.kind: f for f in findings(run)}
    full = got[Kind.KV_CACHE_EXHAUSTED]
    assert "Mamba state pool was full (100.0% in use at most) in 1 of 2" in full.explanation
    assert (full.numbers["mamba_usage"], full.numbers["first_line"]) == (1.0, 1)
    assert got[Kind.REQUESTS_WAITING].severity is Severity.WARNING
    assert findings(run_of(batch(1, running=4, extra={"mamba_usage": 0.8}))) == []
