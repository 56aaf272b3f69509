"""A stats line whose counters contradict each other is named; the rounding of printed
figures is not a contradiction."""

from hypothesis import given
from hypothesis import strategies as st

from eventlog.postmortem.finding import Kind, Severity
from eventlog.postmortem.intervals.counters import contradictions
from tests.eventlog.postmortem.intervals.runs import batch, findings, run_of, spec, window


def test_a_rate_that_disagrees_with_its_counts() -> None:
    bad = window(1, accepted=97, drafted=225, acc_per_pos=[0.844, 0.6, 0.378, 0.222, 0.111],
                 draft_acceptance=0.9, mean_accept_len=3.16)
    (f,) = findings(run_of(bad))
    assert f.kind is Kind.ENGINE_COUNTER_MISMATCH and "acceptance rate 90.0%" in f.explanation


def test_more_accepted_than_drafted_and_a_rising_position() -> None:
    p = spec(1, 12, 10, [0.5, 0.7]).payload()
    found = contradictions(p)
    assert any("accepted 12 > drafted 10" in c for c in found)
    assert any("position 2 accepted more often" in c for c in found)


@given(st.integers(1, 5), st.integers(1, 2000), st.data())
def test_figures_printed_as_vllm_prints_them_agree(k: int, steps: int, data: st.DataObject
                                                   ) -> None:
    """Counts of `steps` verifies of k drafts, accepted as prefixes, printed rounded."""
    counts = sorted(data.draw(st.lists(st.integers(0, steps), min_size=k, max_size=k)),
                    reverse=True)
    drafted, accepted = steps * k, sum(counts)
    p = window(1, accepted=accepted, drafted=drafted,
               acc_per_pos=[round(c / steps, 3) for c in counts],
               draft_acceptance=round(accepted / drafted, 3),
               mean_accept_len=round(1 + accepted / steps, 2)).payload()
    assert contradictions(p) == []


def test_a_running_request_holding_no_kv_token_contradicts_its_line() -> None:
    """SGLang's `#running-req: 1, #full token: 0` (a Laguna run's line 386)."""
    assert contradictions(batch(386, running=1, extra={"tokens": 0}).payload()) == [
        "1 request(s) running but 0 KV tokens in use (#token)"]
    assert contradictions(batch(1, running=0, extra={"tokens": 0}).payload()) == []
    (f,) = findings(run_of(batch(1, running=2, extra={"tokens": 500}),
                           batch(2, running=1, extra={"tokens": 0})))
    assert f.kind is Kind.ENGINE_COUNTER_MISMATCH and f.numbers["first_line"] == 2


def test_one_line_of_running_requests_without_tokens_is_a_note() -> None:
    """The Laguna run's lone line 386 (its answer logged a line before): a note; two such
    lines, or any other contradiction beside it, a warning."""
    (lone,) = findings(run_of(batch(1, running=2, extra={"tokens": 500}),
                              batch(2, running=1, extra={"tokens": 0})))
    assert lone.severity is Severity.INFO and "One line alone" in lone.explanation
    (twice,) = findings(run_of(batch(1, running=1, extra={"tokens": 0}),
                               batch(2, running=1, extra={"tokens": 0})))
    assert twice.severity is Severity.WARNING
    (rate,) = findings(run_of(window(1, accepted=97, drafted=225, draft_acceptance=0.9)))
    assert rate.severity is Severity.WARNING
