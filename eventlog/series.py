"""An interval session's series read back: its `interval` events (fsm.payloads.Interval)
in log order, each with its time, for `show`, `export parquet` and `report`."""

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from eventlog.reader import PAYLOAD, SEQ, TIME, scan_rows
from fsm.payloads import Interval
from fsm.states import Trigger

SERIES = "intervals"
"""The stored configuration's `series` for an interval session (what `show`, `export`,
`report` and the postmortem's interval detectors look for)."""


def is_series(config: dict[str, Any]) -> bool:
    """Whether a session's configuration is an interval session's."""
    return config.get("series") == SERIES


@dataclass(frozen=True, slots=True)
class Point:
    """One interval of the series: its event's seq, its time on the session's clock
    (seconds from the run's first timed line) and its payload."""

    seq: int
    t: float
    interval: Interval


def interval_series(engine: Engine, session_id: int) -> list[Point]:
    """The session's intervals in log order (empty for a session of rounds)."""
    return [Point(row[SEQ], row[TIME], row[PAYLOAD])
            for rows in scan_rows(engine, session_id, triggers={Trigger.INTERVAL})
            for row in rows]
