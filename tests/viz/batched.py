"""Sessions whose forward events carry the batched schedule's fields (docs/events.md:
`batch_id`, `batch_slots`, `batch_tokens`), made by hand from a sequential sim session."""

from collections import defaultdict
from dataclasses import replace
from typing import Any

from fsm.event import Event
from tests.eventlog.sim import sim_events
from viz.batching import BATCH_ID, BATCH_SLOTS, BATCH_TOKENS, FORWARD_TRIGGERS


def as_batched(events: list[Event]) -> list[Event]:
    """`events` as if one forward had held every slot's i-th forward of each turn: the
    lock-step a batched scheduler keeps while the slots run the same turn."""
    place: dict[int, tuple[int, int]] = {}  # seq -> (turn, i)
    count: dict[tuple[int, int], int] = defaultdict(int)
    for ev in events:
        if ev.trigger in FORWARD_TRIGGERS:
            place[ev.seq] = (ev.turn, count[(ev.slot, ev.turn)])
            count[(ev.slot, ev.turn)] += 1
    members: dict[tuple[int, int], list[Event]] = defaultdict(list)
    for ev in events:
        if ev.seq in place:
            members[place[ev.seq]].append(ev)
    ids = {step: i + 1 for i, step in enumerate(sorted(members))}
    out = []
    for ev in events:
        step = place.get(ev.seq)
        if step is not None:
            rows = members[step]
            ev = replace(ev, payload={**ev.payload, BATCH_ID: ids[step],
                                      BATCH_SLOTS: len(rows),
                                      BATCH_TOKENS: sum(r.payload["batch"] for r in rows)})
        out.append(ev)
    return out


def batched_events(**changes: Any) -> list[Event]:
    """A small sim session (two slots unless `changes` say otherwise), batched by hand."""
    events, _ = sim_events(**{"slots": 2, **changes})
    return as_batched(events)
