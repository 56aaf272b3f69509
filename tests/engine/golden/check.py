"""A session's events against the golden file's record of them: where they first differ.

A sim cell is recorded as the sha256 of its whole rows (every field, times and digests
included: the sim is exact everywhere, see hashes.py) and a short hash of each row, which
finds the first changed event. A torch cell is recorded as its events' exact parts
(parts.py), compared field by field on any machine, and their float parts, compared only
on the machine that recorded them.
"""

from dataclasses import dataclass
from typing import Any

from eventlog.compare import compare_events
from fsm.event import Event
from tests.engine.golden.parts import Floats, Record, rebuild, row_hash, session_hash, split

MARK = 6  # hex digits of a row's hash that locate a changed sim event
LINE = 16  # marks a line of the golden file


@dataclass(frozen=True)
class Difference:
    """The first place where a session's events differ from the recorded ones: the event
    (None: the session as a whole), the field, the recorded value and this run's."""

    seq: int | None
    trigger: str | None
    field: str
    expected: Any
    actual: Any
    note: str = ""

    def __str__(self) -> str:
        where = f"seq {self.seq} ({self.trigger})" if self.seq is not None else "the session"
        text = (f"first difference at {where}, {self.field}: recorded {self.expected!r}, "
                f"this run {self.actual!r}")
        return f"{text}; {self.note}" if self.note else text


def record_sim(events: list[Event]) -> dict[str, Any]:
    """A sim cell's record: the session hash and each row's mark, `LINE` to a string."""
    marks = [row_hash(ev)[:MARK] for ev in events]
    return {"events": session_hash(events),
            "rows": ["".join(marks[i:i + LINE]) for i in range(0, len(marks), LINE)]}


def check_sim(recorded: dict[str, Any], events: list[Event]) -> Difference | None:
    """Where `events` first differ from a recorded sim cell (None: not at all)."""
    if session_hash(events) == recorded["events"]:
        return None
    marks = "".join(recorded["rows"])
    expected = [marks[i:i + MARK] for i in range(0, len(marks), MARK)]
    for i, ev in enumerate(events):
        if i == len(expected):
            return Difference(ev.seq, ev.trigger.value, "event", "<the session had ended>",
                              ev.to_row())
        if row_hash(ev)[:MARK] != expected[i]:
            return Difference(ev.seq, ev.trigger.value, "row", f"<row hash {expected[i]}>",
                              ev.to_row(), f"the {i} events before it are as recorded")
    if len(events) < len(expected):
        return Difference(None, None, "events", len(expected), len(events))
    return Difference(None, None, "session hash", recorded["events"], session_hash(events),
                      "every row's mark agrees (a collision of the short marks)")


def record_torch(events: list[Event]) -> dict[str, Any]:
    """A torch cell's record: every event's exact part, and the float parts."""
    records: list[Record] = []
    floats: Floats = []
    for ev in events:
        record, more = split(ev)
        records.append(record)
        floats.extend(more)
    return {"floats": floats, "events": records}


def recorded_events(recorded: dict[str, Any]) -> list[Event]:
    """The events a torch cell's record holds, float parts included (timings zero)."""
    by_seq: dict[int, Floats] = {}
    for item in recorded["floats"]:
        by_seq.setdefault(item[0], []).append(item)
    return [rebuild(r, by_seq.get(r[0], [])) for r in recorded["events"]]


def check_exact(recorded: dict[str, Any], events: list[Event]) -> Difference | None:
    """Where the exact parts of `events` first differ from a torch cell's record."""
    for i, ev in enumerate(events):
        if i == len(recorded["events"]):
            return Difference(ev.seq, ev.trigger.value, "event", "<the session had ended>",
                              split(ev)[0])
        expected = rebuild(recorded["events"][i], [])
        found = compare_events(expected, rebuild(split(ev)[0], []))
        if found is not None:
            return Difference(ev.seq, ev.trigger.value, found.field, found.expected,
                              found.actual)
    if len(events) < len(recorded["events"]):
        return Difference(None, None, "events", len(recorded["events"]), len(events))
    return None


def check_floats(recorded: dict[str, Any], events: list[Event]) -> Difference | None:
    """Where the float parts of `events` first differ from a torch cell's record (only
    meaningful on the machine that recorded it)."""
    floats = record_torch(events)["floats"]
    triggers = {ev.seq: ev.trigger.value for ev in events}
    for want, got in zip(recorded["floats"], floats, strict=False):
        if want != got:
            seq = min(want[0], got[0])
            field = want[1] if want[:2] == got[:2] else f"{want[1]} | {got[1]}"
            return Difference(seq, triggers.get(seq), f"payload.{field}", want[2], got[2])
    if len(floats) != len(recorded["floats"]):
        return Difference(None, None, "float fields", len(recorded["floats"]), len(floats))
    return None
