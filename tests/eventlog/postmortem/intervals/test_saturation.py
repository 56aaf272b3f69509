"""A streak of windows that accept every drafted token is named (SGLang #28179's loop), on
the engine's rate where the log prints no counts; a few tiny windows, a broken streak and
a plain run are not."""

from eventlog.postmortem.finding import Kind, Severity
from eventlog.postmortem.intervals.saturation import MIN_STREAK, AcceptanceSaturated
from tests.eventlog.postmortem.intervals.runs import batch, findings, run_of, spec


def _loop(n: int, rate: float = 1.0) -> list:  # type: ignore[type-arg]
    return [batch(i, mean_accept_len=8.0, draft_acceptance=rate, running=1,
                  extra={"tokens": 47360 + 320 * i}) for i in range(1, n + 1)]


def test_a_loop_at_rate_one_is_named_with_its_stretch() -> None:
    [f] = findings(run_of(*_loop(10)))
    assert (f.kind, f.severity) == (Kind.ACCEPTANCE_SATURATED, Severity.WARNING)
    assert (f.numbers["windows"], f.numbers["first_line"], f.numbers["last_line"]) == (
        10, 1, 10)
    assert "grew from 47,680 to 50,560" in f.explanation


def test_short_or_broken_streaks_and_small_windows_are_not() -> None:
    assert findings(run_of(*_loop(MIN_STREAK - 1))) == []
    broken = _loop(8)
    broken[4] = batch(5, mean_accept_len=7.5, draft_acceptance=0.93)
    assert findings(run_of(*broken)) == []
    tiny = [spec(i, 6, 6, [1.0, 1.0, 1.0]) for i in range(1, 11)]
    assert findings(run_of(*tiny)) == []
    counted = [spec(i, 120, 120, [1.0, 1.0, 1.0]) for i in range(1, 6)]
    assert [f.kind for f in findings(run_of(*counted))] == [Kind.ACCEPTANCE_SATURATED]


def test_a_session_of_rounds_is_not_read() -> None:
    assert AcceptanceSaturated({"series": None}).handlers() == {}
    assert AcceptanceSaturated({"series": "intervals"}).handlers() != {}
