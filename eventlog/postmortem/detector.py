"""The detector interface: each failure pattern is a small fold over the events it needs."""

from typing import Any, Protocol

from eventlog.postmortem.finding import Finding
from fsm.event import Event
from fsm.states import Trigger


class Detector(Protocol):
    """Folds the events whose trigger is in `triggers`, in log order, then reports."""

    triggers: tuple[Trigger, ...]

    def feed(self, ev: Event) -> None:
        """Take one event."""

    def finish(self) -> list[Finding]:
        """The findings, once every event was fed."""


def config_value(config: dict[str, Any], key: str, default: Any = None) -> Any:
    """A setting of the recorded configuration (old logs may lack newer keys)."""
    return config.get(key, default)


def examples(rows: list[dict[str, Any]], limit: int = 10) -> list[dict[str, Any]]:
    """The first `limit` rows: a finding quotes examples, never an unbounded list."""
    return rows[:limit]
