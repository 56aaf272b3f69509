"""The detector interface: each failure pattern is a small fold over the events it needs.

A detector names, per trigger, the handler that folds such an event, and which of those
triggers' payloads, durations and sources the handlers read: a stored session's
postmortem reads nothing else from the database (`eventlog.postmortem.analyze`). A
handler takes the event's fields as one tuple, `Row`, exactly as the database driver
gives them (building an object per event cost more than the detectors' folding), and the
decoded payload; a field a detector did not ask for may be a placeholder there.
"""

from collections.abc import Callable
from typing import Any, Protocol

from eventlog.postmortem.finding import Finding
from fsm.states import Trigger

Row = tuple[Any, ...]
"""One event's fields as `eventlog.reader.scan_rows` reads them (its `Row`)."""
SEQ, SLOT, TURN, ROUND, TRIGGER, DURATION, SOURCE, T, PAYLOAD = range(9)
"""The positions of the fields in a `Row`."""

Handler = Callable[[Row, Any], None]
"""Folds one event: its `Row` and its payload (None where the payload was not read)."""


class Detector(Protocol):
    """Folds the events of the triggers it handles, in log order, then reports."""

    payloads: frozenset[Trigger]
    """The triggers whose payloads the handlers read."""
    timed: frozenset[Trigger]
    """The triggers whose durations the handlers read (None for the rest)."""
    sourced: frozenset[Trigger]
    """The triggers whose source state the handlers read (None for the rest)."""

    def handlers(self) -> dict[Trigger, Handler]:
        """The handler of each trigger this detector folds."""

    def finish(self) -> list[Finding]:
        """The findings, once every event was fed."""


def config_value(config: dict[str, Any], key: str, default: Any = None) -> Any:
    """A setting of the recorded configuration (old logs may lack newer keys)."""
    return config.get(key, default)


def examples(rows: list[dict[str, Any]], limit: int = 10) -> list[dict[str, Any]]:
    """The first `limit` rows: a finding quotes examples, never an unbounded list."""
    return rows[:limit]
