"""The round timeline marks the rounds that shared a target forward, and a sequential
session shows no such marks."""

from hypothesis import given, settings
from hypothesis import strategies as st

from fsm.states import Trigger
from tests.eventlog.sim import sim_events
from tests.viz.batched import as_batched, batched_events
from viz import GraphFormat, timeline_dot, timeline_graph
from viz.batching import collect_forwards, summarize
from viz.render import pipe


def test_batched_rounds_name_their_forward_and_are_marked_shared() -> None:
    events = batched_events(answer_tokens=30)
    g = timeline_graph(events)
    forwards = g.graph["forwards"]
    assert forwards == collect_forwards(events)
    for ev in events:
        if ev.trigger in (Trigger.VERIFY, Trigger.DECODE, Trigger.RETRY):
            n = g.nodes[(ev.slot, ev.turn, ev.round)]
            assert ev.payload["batch_id"] in n["forwards"]
            assert n["shared"] is (ev.payload["batch_slots"] > 1)
    # both slots ran every turn: each forward holds one row of each, the tokens add up
    shared = [f for f in forwards.values() if f.shared]
    assert shared and all({r.slot for r in f.rows} == {0, 1} for f in shared)
    assert all(f.tokens == sum(r.tokens for r in f.rows) for f in forwards.values())
    svg = pipe(timeline_dot(g, "t"), GraphFormat.SVG).decode()
    assert "shared forwards:" in svg and "in shared forwards" in svg
    assert f"of {len(forwards)} forwards held more than one slot" in svg
    small = pipe(timeline_dot(g, "t", max_bars=4), GraphFormat.SVG).decode()
    assert "per bar" in small


def test_a_sequential_session_has_no_forward_marks() -> None:
    events, _ = sim_events(slots=2, answer_tokens=30)
    g = timeline_graph(events)
    assert g.graph["forwards"] == {} and summarize(g.graph["forwards"]) is None
    assert not any(n["shared"] or n["forwards"] for _, n in g.nodes(data=True))
    source = timeline_dot(g, "t").source
    assert "shared forwards" not in source and "blue foot" not in source


@settings(max_examples=10, deadline=None)
@given(slots=st.integers(1, 3), draft=st.integers(1, 6), plain=st.booleans())
def test_summary_adds_up(slots: int, draft: int, plain: bool) -> None:
    events, _ = sim_events(slots=slots, draft_max=draft, answer_tokens=12,
                           drafter="none" if plain else "synthetic")
    s = summarize(collect_forwards(as_batched(events)))
    assert s is not None
    assert [x.slot for x in s.slots] == list(range(slots))
    assert s.rows == sum(x.forwards for x in s.slots)  # one row per slot per forward
    assert abs(sum(x.token_share for x in s.slots) - 1.0) < 1e-9
    assert 1 <= s.mean_slots <= s.max_slots <= slots
    assert (s.shared > 0) is (slots > 1)
    if plain:  # plain decoding puts one token per slot row
        assert s.mean_tokens == s.mean_slots


def test_a_batched_sessions_forwards_add_up_to_what_its_events_record() -> None:
    events, _ = sim_events(slots=3, schedule="batched", answer_tokens=30)
    g = timeline_graph(events)
    forwards = g.graph["forwards"]
    assert forwards and max(f.slots for f in forwards.values()) == 3
    for f in forwards.values():
        assert len(f.rows) == f.slots == len({r.slot for r in f.rows})
        assert sum(r.tokens for r in f.rows) == f.tokens
    assert "shared forwards:" in timeline_dot(g, "t").source
