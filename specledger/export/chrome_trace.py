"""A timeline as Chrome's Trace Event Format (JSON; chrome://tracing, Perfetto, Speedscope).

The JSON object form: `traceEvents`, `displayTimeUnit`, and `otherData` about the session.
The session is a process (pid = session id), each slot a thread (tid = slot) named by
metadata events. Slices are duration events ("B" then "E", properly nested per thread),
findings instant events ("i", thread scope), counters "C" events named per slot. Times
are microseconds. Events are written as they come, so memory does not grow with the log.
"""

from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from eventlog.jsoncodec import encode_json
from specledger.export.timeline import CounterValue, Instant, Record, SliceBegin, SliceEnd


def us(ns: int) -> float:
    """Microseconds, the format's unit."""
    return ns / 1000.0


def trace_event(record: Record, session: int) -> dict[str, Any]:
    """One record as one trace event."""
    base = {"pid": session, "tid": record.slot, "ts": us(record.ts)}
    if isinstance(record, SliceBegin):
        return {**base, "ph": "B", "name": record.name, "cat": record.level.value,
                "args": record.args}
    if isinstance(record, SliceEnd):
        return {**base, "ph": "E", "args": record.args}
    if isinstance(record, Instant):
        return {**base, "ph": "i", "s": "t", "name": record.name, "cat": "finding",
                "args": record.args}
    assert isinstance(record, CounterValue)
    # Counters belong to the process in this format: the slot goes into the name.
    return {"pid": session, "ts": us(record.ts), "ph": "C",
            "name": f"slot {record.slot} {record.kind.value}",
            "args": {record.kind.value: record.value}}


def _metadata(session: int, slot: int) -> list[dict[str, Any]]:
    return [{"pid": session, "tid": slot, "ph": "M", "name": "thread_name",
             "args": {"name": f"slot {slot}"}},
            {"pid": session, "tid": slot, "ph": "M", "name": "thread_sort_index",
             "args": {"sort_index": slot}}]


def _write(out: IO[str], event: dict[str, Any], first: bool) -> None:
    out.write(("\n" if first else ",\n") + encode_json(event))


def write_chrome_trace(records: Iterable[Record], session: int, path: Path) -> int:
    """Write `records` to `path` in the Trace Event Format; the number of records."""
    n = 0
    slots: set[int] = set()
    with path.open("w", encoding="utf-8") as out:
        out.write('{"displayTimeUnit":"ms","otherData":'
                  + encode_json({"session": session, "source": "specledger"})
                  + ',"traceEvents":[')
        _write(out, {"pid": session, "ph": "M", "name": "process_name",
                     "args": {"name": f"specledger session {session}"}}, True)
        for record in records:
            if record.slot not in slots:
                slots.add(record.slot)
                for meta in _metadata(session, record.slot):
                    _write(out, meta, False)
            _write(out, trace_event(record, session), False)
            n += 1
        out.write("\n]}\n")
    return n
