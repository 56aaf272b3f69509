"""Graphs built from events (networkx) and their rendering (graphviz)."""

from viz.fsm_graph import fsm_graph
from viz.render import GraphFormat, render

__all__ = ["GraphFormat", "fsm_graph", "render"]
