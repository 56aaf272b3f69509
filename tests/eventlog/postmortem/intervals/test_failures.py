"""Each failure the run's log names is an error quoting its message, its last lines and
what it was serving."""

from adapters.logs.intervals.run import Failure, FailureKind
from eventlog.postmortem.finding import Kind, Severity
from tests.eventlog.postmortem.intervals.runs import findings, run_of


def test_each_failure_is_an_error_with_its_last_lines_and_requests() -> None:
    run = run_of(failures=[
        Failure(FailureKind.WORKER_DIED, 11, "05-13 10:46:43", "Worker proc died",
                ["a", "b"], [], 5),
        Failure(FailureKind.ENGINE_DIED, 13, None, "RuntimeError: boom", ["c"], ["req-1"])])
    first, second = findings(run)
    assert (first.kind, first.severity) == (Kind.SERVER_CRASH, Severity.ERROR)
    assert "5 request(s) were running" in first.explanation and "a | b" in first.explanation
    assert second.numbers["requests"] == ["req-1"] and "RuntimeError: boom" in \
        second.explanation
