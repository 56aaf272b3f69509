"""Graphs from events: the round timeline, the divergence tree and the machine diagram."""

from dataclasses import replace

from fsm.states import TRANSITIONS, Trigger
from tests.eventlog.sim import sim_events
from viz import (
    GraphFormat,
    divergence_dot,
    divergence_tree,
    machine_dot,
    timeline_dot,
    timeline_graph,
)
from viz.render import inline_svg, pipe


def test_timeline_has_a_node_per_round_with_its_counts() -> None:
    events, _ = sim_events(eog_policy="legacy", answer_tokens=40)
    g = timeline_graph(events)
    commits = [e for e in events if e.trigger is Trigger.COMMIT]
    assert g.number_of_nodes() == len(commits)
    for c in commits:
        n = g.nodes[(c.slot, c.turn, c.round)]
        assert n["accepted"] == c.payload["accepted"]
        assert n["committed"] == len(c.payload["append"])
        assert n["rejected"] == n["drafted"] - n["accepted"] >= 0
    eog_rounds = [k for k, n in g.nodes(data=True) if n["eog"]]
    assert [k[1] for k in eog_rounds] == [1, 2]  # one EOG round per turn
    assert g.number_of_edges() == len(commits) - 1  # one chain for the one slot
    svg = pipe(timeline_dot(g, "t", max_bars=5), GraphFormat.SVG).decode()
    assert "slot 0 turn 1" in svg and "per bar" in svg


def test_livelocked_rounds_are_marked() -> None:
    events, _ = sim_events(replay_policy="reverify", tie_flip_rate=0.3)
    g = timeline_graph(events)
    locked = {(e.slot, e.turn, e.round) for e in events if e.trigger is Trigger.LIVELOCK}
    assert locked and all(g.nodes[k]["violations"] and g.nodes[k]["restores"] > 1
                          for k in locked)


def test_divergence_tree_collapses_the_shared_prefix() -> None:
    a, _ = sim_events(eog_policy="legacy", answer_tokens=40)
    b, _ = sim_events(eog_policy="truncate", answer_tokens=40)
    c = [replace(e, t=e.t + 1.0) for e in a]  # a with other timings: identical
    tree = divergence_tree({1: iter(a), 2: iter(b), 3: iter(c)})
    roots = [n for n in tree if tree.in_degree(n) == 0]
    (root,) = roots
    shared = tree.nodes[root]
    (branch,) = tree.successors(root)
    point = tree.nodes[branch]
    first = next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x.payload != y.payload
                 or x.trigger != y.trigger)
    assert shared["sessions"] == [1, 2, 3] and shared["events"] == first
    assert point["kind"] == "branch" and point["seq"] == a[first].seq
    leaves = sorted(tree.nodes[n]["sessions"] for n in tree.successors(branch))
    assert leaves == [[1, 3], [2]]
    svg = pipe(divergence_dot(tree, "d"), GraphFormat.SVG).decode()
    assert "branch point at seq" in svg and "identical" in svg


def test_a_session_against_itself_is_one_node() -> None:
    a, _ = sim_events()
    tree = divergence_tree({1: iter(a), 2: iter(list(a))})
    assert tree.number_of_nodes() == 1
    assert tree.nodes[0]["events"] == len(a)


def test_machine_diagram_comes_from_the_transition_table() -> None:
    dot = machine_dot()
    for trigger, _, _ in TRANSITIONS:
        assert trigger.value in dot.source
    svg = inline_svg(dot, "m_")
    assert svg.startswith("<svg") and 'id="m_' in svg and "<?xml" not in svg
