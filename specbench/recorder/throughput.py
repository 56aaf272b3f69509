"""The recorder suite's throughput: synthetic speculative rounds written to SQLite (group
commit and a commit per round), read back and projected, the bytes each event takes, and
what firing one transition costs (the round machine's table against a bare `transitions`
trigger)."""

import time
from pathlib import Path
from typing import Any

from eventlog import NullRecorder, Recorder, open_db, project, scan_events
from fsm.event import Event
from fsm.machine import RoundMachine, reference_machine
from fsm.payloads import Begin, Commit, Draft, Reject, Restore, Verify
from fsm.states import RoundState, Trigger
from specbench.common import timed
from specledger.api import new_session

UNIT = 6  # events per synthetic round


def synthetic_events(n: int) -> list[Event]:
    """`n` events (whole rounds) shaped like a k=4 speculative round under `checkpoint`,
    with the payloads the engine writes (fsm/payloads.py): draft and target tokens,
    counts, appended tokens, positions, bytes and digests."""
    s, t = RoundState, Trigger
    out: list[Event] = []
    position = 0
    for rnd in range(n // UNIT):
        drafts = [(rnd * 31 + i) % 151_936 for i in range(4)]
        accepted = rnd % 4  # always a partial accept: the costly path
        committed = [*drafts[:accepted], (rnd * 7) % 151_936]
        targets = [*committed, *drafts[accepted + 1:]]
        start, position = position, position + len(committed)
        begin: Begin = {"strategy": "checkpoint", "position": start, "bytes": 2_097_152}
        draft: Draft = {"drafts": drafts, "drafter": "ngram-mod"}
        verify: Verify = {"drafts": drafts, "targets": targets, "batch": 5, "drafted": 4}
        reject: Reject = {"matched": accepted, "eog": None, "cut": 0}
        restore: Restore = {"mode": "checkpoint", "bytes": 2_097_152, "position": start}
        commit: Commit = {"append": committed, "position": position, "digest": f"{rnd:016x}",
                          "accepted": accepted, "cut": 0}
        steps = (
            (t.BEGIN, s.IDLE, s.CHECKPOINT, begin),
            (t.DRAFT, s.CHECKPOINT, s.SPECULATE, draft),
            (t.VERIFY, s.SPECULATE, s.VERIFY, verify),
            (t.REJECT, s.VERIFY, s.REJECT, reject),
            (t.RESTORE, s.REJECT, s.RESTORE, restore),
            (t.COMMIT, s.RESTORE, s.COMMIT, commit),
        )
        slot, turn = rnd % 4, rnd // 64
        for i, (trigger, source, dest, payload) in enumerate(steps):
            seq = rnd * UNIT + i
            out.append(
                Event(seq, slot, turn, rnd, trigger, source, dest, seq * 1e-4, 1e-4, payload)
            )
    return out


def _feed(sink: Recorder | NullRecorder, events: list[Event]) -> float:
    """Seconds to append `events` round by round and close: what the engine's loop pays."""
    start = time.perf_counter()
    for i, event in enumerate(events):
        sink.append(event)
        if i % UNIT == UNIT - 1:
            sink.end_unit()
    sink.close()
    return time.perf_counter() - start


def _db_bytes(path: Path) -> int:
    """The SQLite file with its WAL and shared-memory files."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def transition_cost(rounds: int) -> dict[str, float]:
    """Microseconds per transition over `rounds` reject rounds: `RoundMachine.fire` (table
    lookup, guards and the Event it records, into a sink that drops it) and the same
    trigger on a bare `transitions` model (no callbacks, no event)."""
    path = (Trigger.BEGIN, Trigger.DRAFT, Trigger.VERIFY, Trigger.REJECT, Trigger.RESTORE,
            Trigger.REPLAY, Trigger.COMMIT, Trigger.NEXT)
    n = rounds * len(path)

    class Model:
        state: str

    model = Model()
    reference_machine(model)
    start = time.perf_counter()
    for _ in range(rounds):
        for trigger in path:
            getattr(model, trigger.value)()
    bare = time.perf_counter() - start
    machine = RoundMachine(0, NullRecorder(), iter(range(n)).__next__, lambda: 0.0)
    payload = {"drafts": [1], "append": [1]}
    start = time.perf_counter()
    for _ in range(rounds):
        for trigger in path:
            machine.fire(trigger, 0.0, payload)
    ours = time.perf_counter() - start
    return {"round_machine_us": ours / n * 1e6, "transitions_us": bare / n * 1e6}


def throughput(n_events: int, workdir: Path) -> dict[str, Any]:
    """Write rates, read-back and projection speed and bytes per event for `n_events`
    synthetic events."""
    events = synthetic_events(n_events)
    n = len(events)
    null_s = _feed(NullRecorder(), events)

    path = workdir / "group.db"
    engine = open_db(str(path), True)
    sid = new_session(engine, {"synthetic_events": n}, "synthetic")
    group_s = _feed(Recorder(engine, sid), events)
    engine.dispose()  # the last connection checkpoints the WAL into the main file
    size = _db_bytes(path)

    reader = open_db(str(path), False)
    stored, read_s = timed(lambda: list(scan_events(reader, sid)))
    _, fold_s = timed(project, stored)
    reader.dispose()

    # A commit per round is ~10x slower; a tenth of the events shows the rate.
    few = events[: max(UNIT, n // 10 // UNIT * UNIT)]
    engine = open_db(str(workdir / "per_unit.db"), True)
    sid = new_session(engine, {"synthetic_events": len(few)}, "synthetic")
    unit_s = _feed(Recorder(engine, sid, flush_events=1), few)
    engine.dispose()

    return {
        "events": n,
        "unit": UNIT,
        "group_commit": {
            "events_per_s": n / group_s,
            "overhead_us_per_event": (group_s - null_s) / n * 1e6,
        },
        "commit_per_unit": {
            "events": len(few),
            "rows_per_s": len(few) / unit_s,
            "transactions_per_s": len(few) / UNIT / unit_s,
        },
        "null_recorder_events_per_s": n / null_s,
        "read_events_per_s": n / read_s,
        "projection_events_per_s": n / fold_s,
        "db_bytes_per_event": size / n,
        "fire": transition_cost(max(n // 8, 100)),
    }
