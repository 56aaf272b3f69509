"""Speculation slower than decoding without it, against the run's own plain windows or
another run of the same log that never speculated; faster speculation says nothing."""

from eventlog.postmortem.finding import Kind
from tests.eventlog.postmortem.intervals.runs import findings, run_of, spec, window


def test_slower_than_a_plain_run_of_the_same_log() -> None:
    run = run_of(spec(2, 630, 652, [0.966], generation_tps=128.3, running=1))
    (f,) = findings(run, ({"run": 1, "pid": 7, "generation_tps": [342.2]},))
    assert f.kind is Kind.SPECULATION_SLOWER
    assert (f.numbers["speculative_tps"], f.numbers["plain_tps"]) == (128.3, 342.2)
    assert "run 1 of the same log (pid 7)" in f.explanation


def test_slower_than_the_runs_own_plain_windows() -> None:
    run = run_of(window(1, generation_tps=50.0, running=1),
                 spec(2, 80, 100, [0.8], generation_tps=30.0, running=1))
    assert [f.kind for f in findings(run)] == [Kind.SPECULATION_SLOWER]


def test_faster_speculation_or_nothing_to_compare_says_nothing() -> None:
    fast = run_of(window(1, generation_tps=50.0, running=1),
                  spec(2, 80, 100, [0.8], generation_tps=90.0, running=1))
    alone = run_of(spec(2, 80, 100, [0.8], generation_tps=10.0, running=1))
    assert findings(fast) == [] and findings(alone) == []
