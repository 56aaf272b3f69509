"""The state graph a session actually walked: states as nodes, transitions as edges with
their counts and durations, invariant violations marked on the states they hit."""

from collections.abc import Iterable

import networkx as nx

from fsm.event import Event
from fsm.states import RoundState, Trigger

_NOTES = (Trigger.INVARIANT_VIOLATION, Trigger.LIVELOCK)


def fsm_graph(events: Iterable[Event]) -> nx.MultiDiGraph:
    """Fold events into a multigraph keyed by trigger: edge attributes `count`,
    `total_s`, `max_s`; node attributes `visits`, `violations`, `livelocks`."""
    g = nx.MultiDiGraph()
    for state in RoundState:
        g.add_node(state.value, visits=0, violations=0, livelocks=0)
    for ev in events:
        src, dst = ev.source.value, ev.dest.value
        if ev.trigger in _NOTES:
            key = "violations" if ev.trigger is Trigger.INVARIANT_VIOLATION else "livelocks"
            g.nodes[src][key] += 1
            continue
        g.nodes[dst]["visits"] += 1
        key = ev.trigger.value
        if g.has_edge(src, dst, key):
            data = g.edges[src, dst, key]
            data["count"] += 1
            data["total_s"] += ev.duration
            data["max_s"] = max(data["max_s"], ev.duration)
        else:
            g.add_edge(src, dst, key=key, count=1, total_s=ev.duration, max_s=ev.duration)
    g.remove_nodes_from([n for n, d in list(g.nodes(data=True)) if g.degree(n) == 0
                         and not d["violations"] and not d["livelocks"]])
    return g
