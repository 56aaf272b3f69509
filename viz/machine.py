"""The round machine's own diagram, drawn by transitions' GraphMachine from the same
transition table the engine runs on (so the picture cannot drift from the code)."""

import graphviz
from transitions import Machine
from transitions.extensions import GraphMachine

from fsm.machine import reference_machine


def machine_dot(title: str = "round machine") -> graphviz.Digraph:
    """The graphviz description of every state and transition of `RoundMachine`."""
    m = reference_machine(Machine.self_literal, GraphMachine, graph_engine="graphviz",
                          title=title, show_conditions=False)
    return m.get_graph()
