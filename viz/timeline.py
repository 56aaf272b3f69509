"""The round timeline: per round, what was drafted, accepted and rejected, where EOG fell,
and which rounds restored repeatedly or broke an invariant.

The graph has one node per round, linked in order within a slot. Drawn, each (slot, turn)
becomes one graphviz node whose HTML label is a bar chart: a column per round (rounds are
summed into buckets when a turn has more than `max_bars`), green for accepted drafts, red
for rejected ones, a black cap where the round held the EOG, an orange foot where the
round restored more than once, and a purple foot where an invariant failed.
"""

from collections.abc import Iterable
from itertools import groupby

import graphviz
import networkx as nx

from fsm.event import APPEND, Event
from fsm.states import Trigger

T = Trigger
_PX = 3  # pixels per token
_ACCEPTED, _REJECTED, _EOG, _STORM, _BAD = "#2e9d57", "#d6544a", "#111111", "#f0a020", "#7b2cbf"
LEGEND = ("green: accepted drafts, red: rejected drafts (3 px per token), black cap: EOG, "
          "orange foot: repeated restores, purple foot: invariant violation or livelock")


def timeline_graph(events: Iterable[Event]) -> nx.DiGraph:
    """Rounds as nodes keyed (slot, turn, round): `drafted`, `accepted`, `rejected`,
    `committed`, `eog`, `restores`, `violations`, `first_seq`, `last_seq`."""
    g = nx.DiGraph()
    last: dict[int, tuple[int, int, int]] = {}
    for ev in events:
        if ev.round == 0:
            continue  # prefill and turn bookkeeping belong to no round
        key = (ev.slot, ev.turn, ev.round)
        if key not in g:
            g.add_node(key, drafted=0, accepted=0, rejected=0, committed=0, eog=False,
                       restores=0, violations=0, first_seq=ev.seq, last_seq=ev.seq)
            if ev.slot in last:
                g.add_edge(last[ev.slot], key)
            last[ev.slot] = key
        n = g.nodes[key]
        n["last_seq"] = ev.seq
        p, trig = ev.payload, ev.trigger
        if trig is T.VERIFY:
            n["drafted"] = p.get("drafted", 0)
        elif trig is T.ACCEPT or trig is T.REJECT:
            n["eog"] = n["eog"] or p.get("eog") is not None
        elif trig is T.COMMIT:
            n["accepted"] = p.get("accepted", 0)
            n["rejected"] = n["drafted"] - n["accepted"]
            n["committed"] = len(p.get(APPEND, ()))
        elif trig is T.RESTORE:
            n["restores"] += 1
        elif trig is T.INVARIANT_VIOLATION or trig is T.LIVELOCK:
            n["violations"] += 1
    return g


def timeline_dot(g: nx.DiGraph, title: str, max_bars: int = 300) -> graphviz.Digraph:
    """A graphviz description of a timeline graph: one bar-chart node per (slot, turn)."""
    d = graphviz.Digraph(name="timeline", graph_attr={
        "label": f"{title}\\n{LEGEND}", "labelloc": "t", "rankdir": "TB", "fontname": "Helvetica",
        "nodesep": "0.1", "ranksep": "0.15"})
    d.attr("node", shape="plaintext", fontname="Helvetica", fontsize="10")
    d.attr("graph", fontsize="11")
    d.attr("edge", style="invis")
    rounds = sorted(g.nodes)
    prev = None
    for (slot, turn), group in groupby(rounds, key=lambda k: (k[0], k[1])):
        keys = list(group)
        name = f"s{slot}t{turn}"
        d.node(name, label=_label(g, keys, slot, turn, max_bars))
        if prev is not None:
            d.edge(prev, name)
        prev = name
    return d


def _label(g: nx.DiGraph, keys: list[tuple[int, int, int]], slot: int, turn: int,
           max_bars: int) -> str:
    size = -(-len(keys) // max_bars)  # rounds per bar
    bars = [_bucket([g.nodes[k] for k in keys[i:i + size]]) for i in range(0, len(keys), size)]
    drafted = sum(b["drafted"] for b in bars)
    accepted = sum(b["accepted"] for b in bars)
    eog = [k[2] for k in keys if g.nodes[k]["eog"]]
    head = (f"slot {slot} turn {turn}: {len(keys)} rounds"
            + (f" ({size} per bar)" if size > 1 else "")
            + f", {accepted}/{drafted} drafts accepted"
            + (f", EOG in round {eog[0]}" if eog else ""))
    top = max((b["drafted"] for b in bars), default=0) * _PX // size
    cols = "".join(_column(b, top, size) for b in bars)
    # The bars sit in a table of their own, so a wide heading cannot spread them apart.
    return (f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0">'
            f'<TR><TD ALIGN="LEFT">{head}</TD></TR><TR><TD ALIGN="LEFT">'
            f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="1" CELLPADDING="0" FIXEDSIZE="TRUE" '
            f'WIDTH="{4 * len(bars) + 1}" HEIGHT="{top + 8}"><TR>{cols}</TR>'
            "</TABLE></TD></TR></TABLE>>")


def _bucket(nodes: list[dict]) -> dict:
    out = {k: sum(n[k] for n in nodes) for k in ("drafted", "accepted", "rejected",
                                                  "restores", "violations")}
    out["eog"] = any(n["eog"] for n in nodes)
    out["storm"] = any(n["restores"] > 1 for n in nodes)
    out["rounds"] = nodes
    return out


def _column(b: dict, top: int, size: int) -> str:
    first, last = b["rounds"][0], b["rounds"][-1]
    tip = f"seq {first['first_seq']}..{last['last_seq']}: {b['accepted']}/{b['drafted']} " \
          f"accepted, {b['restores']} restores"
    acc = b["accepted"] * _PX // size
    rej = b["rejected"] * _PX // size
    marks = [(2 if b["eog"] else 0, _EOG), (rej, _REJECTED), (acc, _ACCEPTED),
             (2 if b["storm"] else 0, _STORM), (2 if b["violations"] else 0, _BAD)]
    cells = [(top + 6 - sum(h for h, _ in marks), "white"), *marks]
    rows = "".join(f'<TR><TD FIXEDSIZE="TRUE" WIDTH="3" HEIGHT="{h}" BGCOLOR="{c}"></TD></TR>'
                   for h, c in cells if h > 0)
    return (f'<TD VALIGN="BOTTOM" TOOLTIP="{tip}" HREF="#">'
            f'<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="0">{rows or "<TR><TD></TD></TR>"}'
            "</TABLE></TD>")
