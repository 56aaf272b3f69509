"""The postmortem's detectors of interval sessions (an engine's log of aggregates: vLLM,
SGLang; adapters/logs/intervals/): each folds the session's `interval` events, or reads the
run's stored source, and says nothing about a session of rounds."""

from typing import Any

from eventlog.postmortem.detector import SEQ, Row
from fsm.payloads import Interval


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


def pct(x: float) -> str:
    """A ratio as a percentage, one decimal."""
    return f"{x * 100:.1f}%"


def line_of(p: dict[str, Any]) -> str:
    """Where a window is: its log line and clock."""
    return f"log line {p['line']}" + (f" ({p['clock']})" if p.get("clock") else "")
