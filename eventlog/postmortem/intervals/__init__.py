"""The postmortem's detectors of interval sessions (an engine's log of aggregates: vLLM,
SGLang; adapters/logs/intervals/): each folds the session's `interval` events, or reads the
run's stored source, and says nothing about a session of rounds."""

from typing import Any

from eventlog.postmortem.detector import SEQ, Handler, Row
from eventlog.series import is_series
from fsm.payloads import Interval
from fsm.states import Trigger


class Windows:
    """The interval events a detector keeps: (seq, payload), in log order."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, Interval]] = []

    def on_interval(self, row: Row, p: Interval) -> None:
        """Keep one interval event."""
        self.rows.append((row[SEQ], p))

    @property
    def speculative(self) -> list[tuple[int, Interval]]:
        """The windows that drafted (SGLang prints only its acceptance length and rate)."""
        return [(s, p) for s, p in self.rows if p["drafted"] or p["acc_per_pos"]
                or p["mean_accept_len"] is not None or p["draft_acceptance"] is not None]


class WindowDetector:
    """A detector that keeps an interval session's windows (`self.windows`) and judges them
    in its `finish`; it says nothing about a session of rounds."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.on = is_series(config)
        self.windows = Windows()

    def handlers(self) -> dict[Trigger, Handler]:
        """INTERVAL, for an interval session only."""
        return {Trigger.INTERVAL: self.windows.on_interval} if self.on else {}


def pct(x: float) -> str:
    """A ratio as a percentage, one decimal."""
    return f"{x * 100:.1f}%"


def line_of(p: dict[str, Any]) -> str:
    """Where a window is: its log line and clock."""
    return f"log line {p['line']}" + (f" ({p['clock']})" if p.get("clock") else "")
