"""Requests answered with an error status: a note for refusals (4xx), a warning where the
server failed (5xx)."""

from adapters.logs.intervals.run import RequestLine
from eventlog.postmortem.finding import Kind, Severity
from tests.eventlog.postmortem.intervals.runs import findings, run_of


def _req(line: int, status: int) -> RequestLine:
    return RequestLine(line, None, None, status, "POST", "/v1/chat/completions")


def test_refusals_are_a_note_failures_a_warning() -> None:
    (note,) = findings(run_of(requests=[_req(1, 200), _req(2, 401)]))
    assert (note.kind, note.severity) == (Kind.HTTP_ERRORS, Severity.INFO)
    (warn,) = findings(run_of(requests=[_req(1, 500), _req(2, 401)]))
    assert warn.severity is Severity.WARNING and warn.numbers["requests"] == 2
    assert findings(run_of(requests=[_req(1, 200)])) == []
