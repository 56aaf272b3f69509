"""The detector interface: each failure pattern is a small fold over the events it needs.

A detector names, per trigger, the handler that folds such an event: a stored session's
postmortem reads only the events of those triggers from the database
(`eventlog.postmortem.analyze`). A handler takes the event's fields as one sequence,
`Row`, as the reader parsed them from the event's stored body (building an object per
event cost more than the detectors' folding), and the payload. A detector reads its
settings from the recorded configuration with a default: old logs may lack newer keys.
"""

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from eventlog import reader
from eventlog.postmortem.finding import Finding
from fsm.states import Trigger

Row = Sequence[Any]
"""One event's fields as `eventlog.reader.scan_rows` reads them (its `Row`)."""
SEQ, SLOT, TURN, ROUND, TRIGGER, DURATION, SOURCE, TIME, PAYLOAD = (
    reader.SEQ, reader.SLOT, reader.TURN, reader.ROUND, reader.TRIGGER, reader.DURATION,
    reader.SOURCE, reader.TIME, reader.PAYLOAD)
"""The positions of the fields in a `Row` (the trigger and source as their names)."""

Handler = Callable[[Row, Any], None]
"""Folds one event: its `Row` and its payload."""

PathOf = Callable[[int, int, int], list[str]]
"""The triggers (their names) of one slot's events from one seq through another, in log
order: read back from the log for the few rounds whose every step a finding quotes."""


class Detector(Protocol):
    """Folds the events of the triggers it handles, in log order, then reports."""

    def handlers(self) -> dict[Trigger, Handler]:
        """The handler of each trigger this detector folds."""

    def finish(self) -> list[Finding]:
        """The findings, once every event was fed."""


def examples(rows: list[dict[str, Any]], limit: int = 10) -> list[dict[str, Any]]:
    """The first `limit` rows: a finding quotes examples, never an unbounded list."""
    return rows[:limit]
