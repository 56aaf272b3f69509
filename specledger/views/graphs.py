"""Which graph `specledger graph` and the report draw, for which sessions."""

from enum import StrEnum
from typing import TYPE_CHECKING

from specledger.errors import UsageError

if TYPE_CHECKING:
    import graphviz
    from sqlalchemy import Engine


class GraphKind(StrEnum):
    """`--kind`: a session's walked FSM, its round timeline, the divergence tree of two or
    more sessions, or the round machine's own diagram (no session needed)."""

    FSM = "fsm"
    TIMELINE = "timeline"
    DIVERGENCE = "divergence"
    MACHINE = "machine"


def graph_dot(engine: "Engine", kind: GraphKind, sessions: list[int]) -> "graphviz.Digraph":
    """The graphviz description of `kind` over `sessions`."""
    # Here, not at the top: `GraphKind` names the CLI's `--kind` choices, which must not
    # import networkx and the ledger.
    from eventlog import get_session
    from eventlog.reader import scan_events
    from viz import (
        divergence_dot,
        divergence_tree,
        fsm_graph,
        machine_dot,
        timeline_dot,
        timeline_graph,
        to_dot,
    )

    _check_count(kind, sessions)
    for sid in sessions:
        get_session(engine, sid)
    if kind is GraphKind.MACHINE:
        return machine_dot()
    if kind is GraphKind.DIVERGENCE:
        tree = divergence_tree({s: scan_events(engine, s) for s in sessions})
        return divergence_dot(tree, f"divergence of sessions {', '.join(map(str, sessions))}")
    (sid,) = sessions
    if kind is GraphKind.TIMELINE:
        return timeline_dot(timeline_graph(scan_events(engine, sid)),
                            f"session {sid}: round timeline")
    return to_dot(fsm_graph(scan_events(engine, sid)), f"session {sid}: round state machine")


def default_name(kind: GraphKind, sessions: list[int]) -> str:
    """The file name (without extension) when `--out` is not given."""
    if kind is GraphKind.MACHINE:
        return "round-machine"
    if kind is GraphKind.DIVERGENCE:
        return f"sessions-{'-'.join(map(str, sessions))}-divergence"
    return f"session-{sessions[0]}-{kind.value}"


def _check_count(kind: GraphKind, sessions: list[int]) -> None:
    if kind is GraphKind.DIVERGENCE and len(sessions) < 2:
        raise UsageError("--kind divergence needs two or more sessions")
    if kind in (GraphKind.FSM, GraphKind.TIMELINE) and len(sessions) != 1:
        raise UsageError(f"--kind {kind.value} draws one session (got {len(sessions)})")
