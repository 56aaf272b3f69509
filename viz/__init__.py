"""Graphs built from events (networkx) and their rendering (graphviz)."""

from viz.divergence import divergence_dot, divergence_tree
from viz.fsm_graph import fsm_graph
from viz.machine import machine_dot
from viz.render import GraphFormat, RenderError, image, inline_svg, to_dot
from viz.timeline import timeline_dot, timeline_graph

__all__ = [
    "GraphFormat",
    "RenderError",
    "divergence_dot",
    "divergence_tree",
    "fsm_graph",
    "image",
    "inline_svg",
    "machine_dot",
    "timeline_dot",
    "timeline_graph",
    "to_dot",
]
