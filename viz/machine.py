"""The round machine's own diagram, drawn by transitions' GraphMachine from the same
transition table the engine runs on (so the picture cannot drift from the code)."""

import graphviz
from transitions.extensions import GraphMachine

from fsm.states import TRANSITIONS, RoundState


def machine_dot(title: str = "round machine") -> graphviz.Digraph:
    """The graphviz description of every state and transition of `RoundMachine`."""
    m = GraphMachine(states=[s.value for s in RoundState], initial=RoundState.IDLE.value,
                     auto_transitions=False, graph_engine="graphviz", title=title,
                     show_conditions=False)
    for trigger, sources, dest in TRANSITIONS:
        m.add_transition(trigger.value, [s.value for s in sources],
                         "=" if dest is None else dest.value)
    return m.get_graph()
