"""The divergence tree of two or more sessions: the event prefix they share collapsed into
one node, each branch point highlighted with the field that differs, and each branch
summarised (events, commits, restores, violations, re-prefill) to its end.

The streams are read once, in lockstep within each group of still-identical sessions, so
memory stays flat however long the sessions are.
"""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import graphviz
import networkx as nx

from eventlog.compare import EXACT, Tolerance, compare_events
from eventlog.diff import END_OF_LOG
from fsm.event import APPEND, Event
from fsm.states import Trigger

T = Trigger


@dataclass
class _Summary:
    events: int = 0
    first_seq: int = 0
    last_seq: int = 0
    committed: int = 0
    restores: int = 0
    violations: int = 0
    reprefill: int = 0

    def add(self, ev: Event) -> None:
        """Count one event of the segment."""
        if not self.events:
            self.first_seq = ev.seq
        self.events += 1
        self.last_seq = ev.seq
        trig = ev.trigger
        if trig is T.COMMIT:
            self.committed += len(ev.payload.get(APPEND, ()))
        elif trig is T.RESTORE:
            self.restores += 1
        elif trig is T.INVARIANT_VIOLATION or trig is T.LIVELOCK:
            self.violations += 1
        elif trig is T.CTX_RESTORE:
            self.reprefill += ev.payload.get("reprefill", 0)


@dataclass
class _Group:
    node: int
    sessions: list[int]
    heads: dict[int, Event | None] = field(default_factory=dict)


def divergence_tree(streams: Mapping[int, Iterator[Event]],
                    tol: Tolerance = EXACT) -> nx.DiGraph:
    """Nodes: `segment` nodes (attributes `sessions`, `events`, `first_seq`, `last_seq`,
    `committed`, `restores`, `violations`, `reprefill`) and `branch` nodes (`seq`,
    `field`, `values`: session -> value). Edges run from a shared segment through its
    branch point to each branch."""
    g = nx.DiGraph()
    ids = iter(range(1 << 62))
    root = next(ids)
    todo = [_Group(root, list(streams), {s: next(streams[s], None) for s in streams})]
    while todo:
        group = todo.pop()
        summary = _Summary()
        split = _follow(group, streams, summary, tol)
        g.add_node(group.node, kind="segment", sessions=group.sessions, **vars(summary))
        if split is None:
            continue
        point, classes, fld, values = split
        b = next(ids)
        g.add_node(b, kind="branch", seq=point, field=fld, values=values)
        g.add_edge(group.node, b)
        for members in classes:
            child = _Group(next(ids), members, {s: group.heads[s] for s in members})
            g.add_edge(b, child.node)
            todo.append(child)
    return g


def _follow(group: _Group, streams: Mapping[int, Iterator[Event]], summary: _Summary,
            tol: Tolerance) -> tuple[int, list[list[int]], str, dict[int, Any]] | None:
    """Advance the group while its sessions agree; the split (seq, classes, field,
    values) where they stop agreeing, or None at the end of the streams."""
    while True:
        heads = group.heads
        lead = group.sessions[0]
        classes: list[list[int]] = []
        for s in group.sessions:
            ev = heads[s]
            for members in classes:
                rep = heads[members[0]]
                if (ev is None and rep is None) or (
                        ev is not None and rep is not None
                        and compare_events(rep, ev, tol) is None):
                    members.append(s)
                    break
            else:
                classes.append([s])
        if len(classes) > 1:
            return _describe(heads, classes, tol)
        if heads[lead] is None:
            return None
        summary.add(heads[lead])  # type: ignore[arg-type]
        for s in group.sessions:
            heads[s] = next(streams[s], None)


def _describe(heads: dict[int, Event | None], classes: list[list[int]], tol: Tolerance
              ) -> tuple[int, list[list[int]], str, dict[int, Any]]:
    reps = [heads[c[0]] for c in classes]
    present = [e for e in reps if e is not None]
    seq = present[0].seq if present else 0
    a, b = reps[0], reps[1]
    if a is None or b is None:
        fld, path = "event", "trigger"  # an ended stream against the other's next event
    else:
        mismatch = compare_events(a, b, tol)
        assert mismatch is not None
        fld = path = mismatch.field
    values = {c[0]: _value(e, path) for c, e in zip(classes, reps, strict=True)}
    return seq, classes, fld, values


def _value(ev: Event | None, path: str) -> Any:
    """The value at a dotted path such as `payload.targets[3]` (None when absent)."""
    if ev is None:
        return END_OF_LOG
    value: Any = ev
    for part in path.replace("[", ".").replace("]", "").split("."):
        if part == "length" and isinstance(value, list):
            return len(value)
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list):
            value = value[int(part)] if int(part) < len(value) else None
        else:
            value = getattr(value, part, None)
    return getattr(value, "value", value)


def divergence_dot(g: nx.DiGraph, title: str) -> graphviz.Digraph:
    """A graphviz description of a divergence tree, branch points in red."""
    d = graphviz.Digraph(name="divergence", graph_attr={
        "label": title, "labelloc": "t", "rankdir": "TB", "fontname": "Helvetica"})
    d.attr("node", fontname="Helvetica", fontsize="10")
    d.attr("edge", fontname="Helvetica", fontsize="9")
    for n, data in g.nodes(data=True):
        if data["kind"] == "branch":
            label = f"branch point at seq {data['seq']}\\n{data['field']}"
            d.node(str(n), label=label, shape="diamond", style="filled", fillcolor="#fbe3e3",
                   color="#c0392b", penwidth="2")
            continue
        who = ", ".join(str(s) for s in data["sessions"])
        shared = len(data["sessions"]) > 1
        note = (" (shared prefix)" if g.out_degree(n) else " (identical)") if shared else ""
        head = f"session{'s' if shared else ''} {who}{note}"
        body = (f"seq {data['first_seq']}..{data['last_seq']}: {data['events']} events"
                if data["events"] else "no events")
        stats = (f"{data['committed']} tokens committed, {data['restores']} restores, "
                 f"{data['violations']} violations, {data['reprefill']} re-prefilled")
        d.node(str(n), label=f"{head}\\n{body}\\n{stats}", shape="box", style="rounded,filled",
               fillcolor="#eef3fb" if shared else "#f4f4f4")
    for u, v in g.edges:
        attrs = {}
        if g.nodes[u]["kind"] == "branch":
            values = g.nodes[u]["values"]
            first = g.nodes[v]["sessions"][0]
            attrs["label"] = "= " + _short(values.get(first))
        d.edge(str(u), str(v), **attrs)
    return d


def _short(value: Any, width: int = 40) -> str:
    text = str(value)
    return text if len(text) <= width else text[: width - 3] + "..."
