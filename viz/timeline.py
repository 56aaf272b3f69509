"""The round timeline: per round, what was drafted, accepted and rejected, where EOG fell,
and which rounds restored repeatedly or broke an invariant.

The graph has one node per round, linked in order within a slot. Drawn, each (slot, turn)
becomes one graphviz node whose HTML label is a bar chart: a column per round (rounds are
summed into buckets when a turn has more than `max_bars`), green for accepted drafts, red
for rejected ones, a black cap where the round held the EOG, an orange foot where the
round restored more than once, a purple foot where an invariant failed, and a blue foot
where the round's target forward also held another slot's rows (`--schedule batched`).

A batched session also gets one node above the tracks, the shared forwards: a column per
forward (`batch_id`, in order) and a row per slot, so the rounds that rode in one forward
stand in one column; each cell stacks the tokens that slot put into it (green: drafts it
accepted, red: drafts it rejected, grey: the plain token every row carries, orange: a
re-verification), and a blue band below counts the forward's slots.
"""

from collections.abc import Iterable
from itertools import groupby

import graphviz
import networkx as nx

from fsm.event import APPEND, Event
from fsm.states import Trigger
from viz.batching import BATCH_ID, FORWARD_TRIGGERS, Forward, ForwardCollector, summarize

T = Trigger
_PX = 3  # pixels per token
_ACCEPTED, _REJECTED, _EOG, _STORM, _BAD = "#2e9d57", "#d6544a", "#111111", "#f0a020", "#7b2cbf"
_SHARED, _PLAIN = "#2a7ab0", "#b8b8b8"
_SLOT_PX = 4  # pixels per slot in the shared forwards' band
_NAME_PX = 44  # the shared forwards' row names ("slot 12")
_ROW_MIN_PX = 12
LEGEND = ("green: accepted drafts, red: rejected drafts (3 px per token), black cap: EOG, "
          "orange foot: repeated restores, purple foot: invariant violation or livelock")
BATCH_LEGEND = ("blue foot: the round's forward held other slots' rows too; shared "
                "forwards: a column per forward, grey: the token every row carries, orange: "
                "re-verification, blue band: slots in the forward")


def timeline_graph(events: Iterable[Event]) -> nx.DiGraph:
    """Rounds as nodes keyed (slot, turn, round): `drafted`, `accepted`, `rejected`,
    `committed`, `eog`, `restores`, `violations`, `first_seq`, `last_seq`, `forwards` (the
    batch ids of its target forwards; empty under the sequential schedule) and `shared`
    (one of them held another slot's rows). `g.graph["forwards"]`: the forwards by batch id
    (`viz.batching.Forward`)."""
    g = nx.DiGraph()
    last: dict[int, tuple[int, int, int]] = {}
    collector = ForwardCollector()
    for ev in events:
        if ev.round == 0:
            continue  # prefill and turn bookkeeping belong to no round
        key = (ev.slot, ev.turn, ev.round)
        if key not in g:
            g.add_node(key, drafted=0, accepted=0, rejected=0, committed=0, eog=False,
                       restores=0, violations=0, first_seq=ev.seq, last_seq=ev.seq,
                       forwards=[], shared=False)
            if ev.slot in last:
                g.add_edge(last[ev.slot], key)
            last[ev.slot] = key
        n = g.nodes[key]
        n["last_seq"] = ev.seq
        p, trig = ev.payload, ev.trigger
        if trig in FORWARD_TRIGGERS and p.get(BATCH_ID) is not None:
            collector.add(ev)
            n["forwards"].append(p[BATCH_ID])
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
    forwards = g.graph["forwards"] = collector.forwards
    for _, n in g.nodes(data=True):
        n["shared"] = any(forwards[b].shared for b in n["forwards"])
    return g


def timeline_dot(g: nx.DiGraph, title: str, max_bars: int = 300) -> graphviz.Digraph:
    """A graphviz description of a timeline graph: one bar-chart node per (slot, turn), and
    for a batched session the shared forwards' node above them."""
    forwards: dict[int, Forward] = g.graph.get("forwards", {})
    legend = LEGEND + (f"\\n{BATCH_LEGEND}" if forwards else "")
    d = graphviz.Digraph(name="timeline", graph_attr={
        "label": f"{title}\\n{legend}", "labelloc": "t", "rankdir": "TB",
        "fontname": "Helvetica", "nodesep": "0.1", "ranksep": "0.15"})
    d.attr("node", shape="plaintext", fontname="Helvetica", fontsize="10")
    d.attr("graph", fontsize="11")
    d.attr("edge", style="invis")
    prev = None
    if forwards:
        prev = "forwards"
        d.node(prev, label=_forwards_label(g, forwards, max_bars))
    for (slot, turn), group in groupby(sorted(g.nodes), key=lambda k: (k[0], k[1])):
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
    shared = sum(1 for k in keys if g.nodes[k]["shared"])
    head = (f"slot {slot} turn {turn}: {len(keys)} rounds"
            + (f" ({size} per bar)" if size > 1 else "")
            + f", {accepted}/{drafted} drafts accepted"
            + (f", EOG in round {eog[0]}" if eog else "")
            + (f", {shared} in shared forwards" if shared else ""))
    top = max((b["drafted"] for b in bars), default=0) * _PX // size
    cols = "".join(_column(b, top, size) for b in bars)
    return _chart(head, f"<TR>{cols}</TR>", 4 * len(bars) + 1, top + 8)


def _chart(head: str, rows: str, width: int, height: int) -> str:
    # The bars sit in a table of their own, so a wide heading cannot spread them apart.
    return (f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0">'
            f'<TR><TD ALIGN="LEFT">{head}</TD></TR><TR><TD ALIGN="LEFT">'
            f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="1" CELLPADDING="0" FIXEDSIZE="TRUE" '
            f'WIDTH="{width}" HEIGHT="{height}">{rows}'
            "</TABLE></TD></TR></TABLE>>")


def _bucket(nodes: list[dict]) -> dict:
    sums = {k: sum(n[k] for n in nodes) for k in ("drafted", "accepted", "rejected",
                                                   "restores", "violations")}
    return {**sums, "eog": any(n["eog"] for n in nodes),
            "storm": any(n["restores"] > 1 for n in nodes),
            "shared": any(n["shared"] for n in nodes), "rounds": nodes}


def _column(b: dict, top: int, size: int) -> str:
    first, last = b["rounds"][0], b["rounds"][-1]
    tip = f"seq {first['first_seq']}..{last['last_seq']}: {b['accepted']}/{b['drafted']} " \
          f"accepted, {b['restores']} restores"
    if b["shared"]:
        ids = sorted({f for n in b["rounds"] for f in n["forwards"]})
        tip += f", forward{'s' if len(ids) > 1 else ''} #{_span(ids)}"
    marks = [(2 if b["eog"] else 0, _EOG), (b["rejected"] * _PX // size, _REJECTED),
             (b["accepted"] * _PX // size, _ACCEPTED), (2 if b["storm"] else 0, _STORM),
             (2 if b["violations"] else 0, _BAD), (2 if b["shared"] else 0, _SHARED)]
    return _stack(marks, top + 8, tip)


def _stack(marks: list[tuple[int, str]], height: int, tip: str) -> str:
    """One column: the `marks` (pixels, colour) stacked top to bottom on white, bottom
    aligned in a cell `height` pixels tall."""
    cells = [(height - 2 - sum(h for h, _ in marks), "white"), *marks]
    rows = "".join(f'<TR><TD FIXEDSIZE="TRUE" WIDTH="3" HEIGHT="{h}" BGCOLOR="{c}"></TD></TR>'
                   for h, c in cells if h > 0)
    return (f'<TD VALIGN="BOTTOM" TOOLTIP="{tip}" HREF="#">'
            f'<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="0">{rows or "<TR><TD></TD></TR>"}'
            "</TABLE></TD>")


def _span(ids: list[int]) -> str:
    return str(ids[0]) if len(ids) == 1 else f"{ids[0]}..{ids[-1]}"


def _forwards_label(g: nx.DiGraph, forwards: dict[int, Forward], max_bars: int) -> str:
    """The shared forwards: a row per slot and a column per forward (bucketed), rows of one
    forward in one column, and the band of slots per forward below."""
    s = summarize(forwards)
    assert s is not None
    ids = sorted(forwards)
    size = -(-len(ids) // max_bars)  # forwards per bar
    buckets = [[forwards[b] for b in ids[i:i + size]] for i in range(0, len(ids), size)]
    slots = [share.slot for share in s.slots]
    # cells[slot][bar]: (accepted, rejected, plain, retried) tokens
    cells = {slot: [_tokens(g, bucket, slot) for bucket in buckets] for slot in slots}
    # Rows at least a line of text tall: their names sit in fixed-size cells.
    top = max(max((sum(c) for row in cells.values() for c in row), default=0) * _PX // size,
              _ROW_MIN_PX)
    band = max(max((sum(f.slots for f in bucket) for bucket in buckets), default=0)
               * _SLOT_PX // size, _ROW_MIN_PX)
    head = (f"shared forwards: {s.shared} of {s.forwards} forwards held more than one slot"
            + (f" ({size} per bar)" if size > 1 else "")
            + f"; {s.mean_slots:.2f} slots and {s.mean_tokens:.1f} tokens per forward "
              f"(most {s.max_slots} slots); {s.shared_rows} of {s.rows} slot rows shared")
    rows = []
    for slot in slots:
        cols = "".join(
            _stack([(r * _PX // size, _REJECTED), (a * _PX // size, _ACCEPTED),
                    (p * _PX // size, _PLAIN), (t * _PX // size, _STORM)], top + 4,
                   f"slot {slot}, forward #{_span([f.batch_id for f in bucket])}: "
                   f"{a + r + p + t} tokens")
            for bucket, (a, r, p, t) in zip(buckets, cells[slot], strict=True))
        rows.append(f'<TR>{_name(f"slot {slot}", top)}{cols}</TR>')
    band_cols = "".join(
        _stack([(sum(f.slots for f in bucket) * _SLOT_PX // size, _SHARED)], band + 4,
               f"forward #{_span([f.batch_id for f in bucket])}: "
               f"{sum(f.slots for f in bucket) / len(bucket):.3g} slots, "
               f"{sum(f.tokens for f in bucket) / len(bucket):.3g} tokens")
        for bucket in buckets)
    rows.append(f'<TR>{_name("slots", band)}{band_cols}</TR>')
    # Fixed size, as in `_chart`: the heading must not spread the columns apart.
    return _chart(head, "".join(rows), _NAME_PX + 4 * len(buckets) + 2,
                  len(slots) * (top + 3) + band + 4)


def _name(text: str, height: int) -> str:
    return (f'<TD FIXEDSIZE="TRUE" WIDTH="{_NAME_PX - 1}" HEIGHT="{height + 2}" '
            f'ALIGN="RIGHT">{text} </TD>')


def _tokens(g: nx.DiGraph, bucket: list[Forward], slot: int) -> tuple[int, int, int, int]:
    """A slot's tokens in `bucket`'s forwards: drafts accepted, drafts rejected, the plain
    token each row carries, and re-verified tokens."""
    acc = rej = plain = retried = 0
    for f in bucket:
        for r in f.rows:
            if r.slot != slot:
                continue
            if r.trigger is T.RETRY:
                retried += r.tokens
                continue
            n = g.nodes[(r.slot, r.turn, r.round)]
            a = min(n["accepted"], max(r.tokens - 1, 0))
            acc, rej, plain = acc + a, rej + max(r.tokens - 1 - a, 0), plain + min(r.tokens, 1)
    return acc, rej, plain, retried
