"""The requests an interval run's server answered with an error status (its access lines:
the status, method and path; the cause is in other lines, if the log has it)."""

from collections import Counter
from typing import Any

from eventlog.postmortem.advice import ADVICE
from eventlog.postmortem.detector import SEQ, Handler, Row
from eventlog.postmortem.finding import Finding, Kind, Severity
from eventlog.series import is_series
from fsm import payloads as pl
from fsm.states import Trigger


class HttpStatuses:
    """Folds the requests' turns; reports those answered with an error."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.on = is_series(config)
        self.errors: list[tuple[int, str]] = []
        self.requests = 0

    def handlers(self) -> dict[Trigger, Handler]:
        """END_TURN, for an interval session only."""
        return {Trigger.END_TURN: self._on_end} if self.on else {}

    def _on_end(self, row: Row, p: pl.EndTurn) -> None:
        self.requests += 1
        error = p["metrics"].get("error")
        if error:
            self.errors.append((row[SEQ], error))

    def finish(self) -> list[Finding]:
        """One finding for the errors, by status and request: a warning where the server
        failed (5xx), a note where it refused (4xx)."""
        if not self.errors:
            return []
        by = Counter(e for _, e in self.errors)
        server = any(e.split()[1].startswith("5") for e in by)
        listed = "; ".join(f"{n} x {e}" for e, n in by.most_common(5))
        return [Finding(
            Kind.HTTP_ERRORS, Severity.WARNING if server else Severity.INFO,
            self.errors[0][0], self.errors[-1][0],
            f"{len(self.errors)} of {self.requests} request(s) were answered with an error: "
            f"{listed}.", ADVICE[Kind.HTTP_ERRORS],
            {"errors": dict(by), "requests": self.requests})]
