"""Projection: the fold equals a plain reference fold, `at=` is the prefix, counters add up."""

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from eventlog import Projector, Recorder, SlotView, project, scan_events
from fsm.event import APPEND, DIGEST, POSITION, TRIM, Event
from fsm.states import RoundState, Trigger

MakeRounds = Callable[..., list[Event]]

_payloads = st.fixed_dictionaries(
    {},
    optional={
        TRIM: st.integers(min_value=0, max_value=12),
        APPEND: st.lists(st.integers(min_value=0, max_value=50_000), max_size=5),
        POSITION: st.integers(min_value=0, max_value=40),
        DIGEST: st.text(alphabet="0123456789abcdef", min_size=1, max_size=8),
    },
)
_steps = st.lists(
    st.tuples(st.integers(min_value=0, max_value=2), st.sampled_from(RoundState), _payloads),
    max_size=60,
)


def _events(steps: list[tuple[int, RoundState, dict[str, Any]]]) -> list[Event]:
    return [
        Event(seq, slot, seq // 10, seq // 3, Trigger.PREFILL, RoundState.IDLE, dest, 0.0, 0.0, p)
        for seq, (slot, dest, p) in enumerate(steps)
    ]


def _reference(events: list[Event]) -> dict[int, tuple[list[int], int, str, RoundState, int]]:
    """The fold written the obvious way, with fresh lists at every step."""
    out: dict[int, tuple[list[int], int, str, RoundState, int]] = {}
    for e in events:
        tokens, position, digest, _, _ = out.get(e.slot, ([], 0, "", RoundState.IDLE, 0))
        if TRIM in e.payload:
            tokens = tokens[: e.payload[TRIM]]
        if APPEND in e.payload:
            tokens = tokens + e.payload[APPEND]
        position = e.payload.get(POSITION, position)
        digest = e.payload.get(DIGEST, digest)
        out[e.slot] = (tokens, position, digest, e.dest, e.round)
    return out


def _facts(views: dict[int, SlotView]) -> dict[int, tuple[list[int], int, str, RoundState, int]]:
    return {s: (v.tokens, v.position, v.digest, v.state, v.round) for s, v in views.items()}


@settings(max_examples=200, deadline=None)
@given(steps=_steps, cut=st.integers(min_value=-1, max_value=70))
def test_projection_equals_the_reference_fold_at_every_prefix(
    steps: list[tuple[int, RoundState, dict[str, Any]]], cut: int
) -> None:
    events = _events(steps)
    original = copy.deepcopy([e.payload for e in events])
    assert _facts(project(events)) == _reference(events)
    assert _facts(project(events, at=cut)) == _reference(events[: cut + 1])
    assert [e.payload for e in events] == original  # folding never mutates the log


def test_counters() -> None:
    s, t = RoundState, Trigger
    rows: list[tuple[Trigger, RoundState, dict[str, Any]]] = [
        (t.CTX_RESTORE, s.IDLE, {"reprefill": 100, TRIM: 0, APPEND: [1, 2, 3]}),
        (t.VERIFY, s.VERIFY, {"drafted": 4}),
        (t.REJECT, s.REJECT, {"matched": 1}),
        (t.RESTORE, s.RESTORE, {}),
        (t.COMMIT, s.COMMIT, {APPEND: [9, 9], "accepted": 1}),
        (t.VERIFY, s.VERIFY, {"drafted": 4}),
        (t.ACCEPT, s.ACCEPT, {"matched": 4}),
        (t.INVARIANT_VIOLATION, s.ACCEPT, {"invariant": "state_truth"}),
        (t.COMMIT, s.COMMIT, {APPEND: [5], "accepted": 4}),
        (t.CTX_RESTORE, s.IDLE, {}),
    ]
    projector = Projector()
    for seq, (trigger, dest, payload) in enumerate(rows):
        projector.apply(Event(seq, 1, 0, seq, trigger, s.IDLE, dest, 0.0, 0.0, payload))
    view = projector.slots[1]
    assert (view.rounds, view.drafted, view.accepted) == (2, 8, 5)
    assert (view.restores, view.ctx_restores, view.reprefill_tokens) == (1, 2, 100)
    assert view.violations == [{"invariant": "state_truth"}]
    assert view.tokens == [1, 2, 3, 9, 9, 5]
    assert view.state is s.IDLE


def test_projection_from_the_database_matches_memory(
    engine: Engine, session_id: int, make_rounds: MakeRounds
) -> None:
    events = make_rounds(20)
    with Recorder(engine, session_id) as rec:
        for i, event in enumerate(events):
            rec.append(event)
            if i % 6 == 5:
                rec.end_unit()
    stored = project(scan_events(engine, session_id), at=59)
    assert stored == project(events[:60])
    assert stored[0].round == 9
    assert stored[0].position == 29
