"""Render networkx graphs with graphviz to svg, png or dot source."""

import graphviz
import networkx as nx

from fsm.errors import SpecledgerError
from viz.formats import GraphFormat


class RenderError(SpecledgerError):
    """graphviz could not render (usually: the `dot` binary is missing)."""


# Edges that exist only when something is wrong or degraded: committing straight from
# reject skips rollback (the `none` strategy), and retry re-verifies a replay (#28060).
_SUSPECT = {("reject", "commit"): "no rollback", ("restore", "verify"): "re-verification"}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def to_dot(g: nx.MultiDiGraph, title: str) -> graphviz.Digraph:
    """A graphviz description of an FSM graph: edge labels carry trigger, count, mean and
    max duration; states with violations are drawn red."""
    d = graphviz.Digraph(name="fsm", graph_attr={"label": title, "labelloc": "t",
                                                 "rankdir": "LR", "fontname": "Helvetica"})
    d.attr("node", shape="box", style="rounded,filled", fillcolor="#eef3fb",
           fontname="Helvetica")
    d.attr("edge", fontname="Helvetica", fontsize="10")
    for node, data in g.nodes(data=True):
        label = f"{node}\\n{data['visits']} visits"
        attrs = {}
        notes = [f"{data[k]} {k}" for k in ("violations", "livelocks") if data[k]]
        if notes:
            label += "\\n" + ", ".join(notes)
            attrs = {"fillcolor": "#fbe3e3", "color": "#c0392b", "penwidth": "2"}
        d.node(node, label=label, **attrs)
    for src, dst, key, data in g.edges(keys=True, data=True):
        mean = data["total_s"] / data["count"]
        label = f"{key} x{data['count']}"
        if data["max_s"] > 0:
            label += f"\\nmean {_ms(mean)}, max {_ms(data['max_s'])}"
        attrs = {}
        if (src, dst) in _SUSPECT:
            label += f"\\n({_SUSPECT[src, dst]})"
            attrs = {"color": "#c0392b", "fontcolor": "#c0392b", "style": "dashed"}
        d.edge(src, dst, label=label, **attrs)
    return d


def image(dot: graphviz.Digraph, fmt: GraphFormat) -> bytes:
    """Any graphviz description as a file's content: dot source, svg or png (the caller
    writes it; engine/files.py says how)."""
    return dot.source.encode() if fmt is GraphFormat.DOT else pipe(dot, fmt)


def pipe(dot: graphviz.Digraph, fmt: GraphFormat) -> bytes:
    """Run graphviz's `dot` over the description; svg or png bytes."""
    try:
        return dot.pipe(format=fmt.value)
    except graphviz.ExecutableNotFound:
        raise RenderError("graphviz's 'dot' binary is missing: install graphviz "
                          "(apt-get install graphviz) or use --format dot") from None
    except graphviz.CalledProcessError as exc:
        raise RenderError(f"graphviz failed: {exc.stderr.decode(errors='replace')[:200]}"
                          ) from None


def inline_svg(dot: graphviz.Digraph, prefix: str) -> str:
    """The SVG of `dot` for embedding in HTML: no XML prolog or doctype, and element ids
    prefixed so that several graphs on one page never share an id."""
    text = pipe(dot, GraphFormat.SVG).decode()
    text = text[text.index("<svg"):]
    return text.replace(' id="', f' id="{prefix}').replace('href="#', f'href="#{prefix}')
