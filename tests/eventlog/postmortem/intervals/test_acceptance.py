"""Acceptance over an interval run: drafts (nearly) never accepted is a collapse naming the
positions that never accept; a second half accepting under half the first's is a collapse
over the run; deep positions under 10% are a note; a steady run says nothing. A log that
prints only each window's rate (SGLang) is judged on those rates."""

from hypothesis import given
from hypothesis import strategies as st

from eventlog.postmortem.finding import Kind, Severity
from eventlog.postmortem.intervals import Windows
from tests.eventlog.postmortem.intervals.runs import batch, findings, run_of, spec


def _kinds(run: object) -> list[tuple[Kind, Severity]]:
    return [(f.kind, f.severity) for f in findings(run)]  # type: ignore[arg-type]


def test_no_draft_accepted_is_a_collapse_naming_every_position() -> None:
    (f,) = findings(run_of(*(spec(i, 0, 495, [0.0] * 5) for i in range(3))))
    assert (f.kind, f.severity) == (Kind.ACCEPTANCE_COLLAPSE, Severity.WARNING)
    assert "positions 1-5 never accepted" in f.explanation
    assert (f.numbers["accepted"], f.numbers["drafted"]) == (0, 1485)


def test_only_the_first_position_accepting_a_little_is_a_collapse() -> None:
    (f,) = findings(run_of(spec(1, 49, 2160, [0.34] + [0.0] * 14),
                           spec(2, 57, 3945, [0.217] + [0.0] * 14)))
    assert f.kind is Kind.ACCEPTANCE_COLLAPSE and "positions 2-15 never" in f.explanation


def test_a_second_half_under_half_the_first_is_a_collapse_over_the_run() -> None:
    good = [spec(i, 80, 100, [0.9, 0.7]) for i in range(4)]
    bad = [spec(i, 20, 100, [0.3, 0.1]) for i in range(4, 8)]
    (f,) = findings(run_of(*good, *bad))
    assert f.kind is Kind.ACCEPTANCE_COLLAPSE and "over the run" in f.explanation
    assert (f.numbers["first_half"], f.numbers["second_half"]) == (0.8, 0.2)


def test_deep_positions_under_a_tenth_are_a_note() -> None:
    pos = [0.74, 0.473, 0.309, 0.187, 0.099, 0.057]
    assert _kinds(run_of(spec(1, 489, 1572, pos), spec(2, 455, 1590, pos))) == [
        (Kind.DRAFT_POSITIONS_WASTED, Severity.INFO)]


@given(st.floats(0.2, 1.0), st.integers(4, 12))
def test_a_steady_run_is_not_judged(rate: float, n: int) -> None:
    """Whatever its level, acceptance that holds over a run is no collapse."""
    accepted = round(rate * 100)
    runs = [spec(i, accepted, 100, [accepted / 100]) for i in range(n)]
    # (every draft accepted window after window is a finding of its own: test_saturation)
    assert [k for k in _kinds(run_of(*runs)) if k[0] is not Kind.ACCEPTANCE_SATURATED] == []


def test_windows_with_only_a_rate_drafted() -> None:
    w = Windows()
    w.on_interval((1,), batch(1, mean_accept_len=2.5, draft_acceptance=0.5).payload())
    w.on_interval((2,), batch(2, generation_tps=40.0).payload())
    assert [s for s, _ in w.speculative] == [1]


def test_a_collapse_is_judged_on_the_engines_rates_where_it_prints_no_counts() -> None:
    rates = [0.6, 0.55, 0.6, 0.1, 0.12, 0.08]
    (f,) = findings(run_of(*(batch(i, mean_accept_len=1 + 3 * r, draft_acceptance=r)
                             for i, r in enumerate(rates, 1))))
    assert f.kind is Kind.ACCEPTANCE_COLLAPSE and "averaged 58.3% in its first 3" in \
        f.explanation
    assert round(f.numbers["second_half"], 2) == 0.1
    (low,) = findings(run_of(*(batch(i, mean_accept_len=1.1, draft_acceptance=0.03)
                               for i in (1, 2))))
    assert "acceptance rate averaged 3.0% over 2 window(s)" in low.explanation
    steady = [batch(i, mean_accept_len=3.8, draft_acceptance=0.95) for i in range(1, 9)]
    assert findings(run_of(*steady)) == []
