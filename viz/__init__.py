"""Graphs built from events (networkx) and their rendering (graphviz).

Its names load on first use, so that a caller naming only a format (the CLI's parser)
does not import networkx.
"""

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from viz.divergence import divergence_dot, divergence_tree
    from viz.formats import GraphFormat
    from viz.fsm_graph import fsm_graph
    from viz.machine import machine_dot
    from viz.render import RenderError, image, inline_svg, to_dot
    from viz.timeline import timeline_dot, timeline_graph

_HOMES = {
    "divergence_dot": "viz.divergence",
    "divergence_tree": "viz.divergence",
    "fsm_graph": "viz.fsm_graph",
    "machine_dot": "viz.machine",
    "GraphFormat": "viz.formats",
    "RenderError": "viz.render",
    "image": "viz.render",
    "inline_svg": "viz.render",
    "to_dot": "viz.render",
    "timeline_dot": "viz.timeline",
    "timeline_graph": "viz.timeline",
}
"""Each name's module, imported when the name is first used."""

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


def __getattr__(name: str) -> Any:
    """A name of the package, from its module on first use."""
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(ModuleType):
    """The package: its exported names win over its submodules' (`fsm_graph` is a module and
    the function the package exports), so importing that submodule does not rebind it."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _HOMES and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
