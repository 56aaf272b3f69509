"""The round state machine: states, triggers, the event record and the invariants.

No torch here: this package is imported by the event log and the viewers as well as
by the engine.
"""

from fsm.errors import (
    EmptyCommitError,
    EmptyDraftError,
    InvalidTransitionError,
    InvariantViolationError,
    ReplayWithoutRestoreError,
    SpecledgerError,
)
from fsm.event import Event
from fsm.invariants import Invariant, Violation
from fsm.machine import RoundMachine
from fsm.states import RoundState, Trigger

__all__ = [
    "EmptyCommitError",
    "EmptyDraftError",
    "Event",
    "InvalidTransitionError",
    "Invariant",
    "InvariantViolationError",
    "ReplayWithoutRestoreError",
    "RoundMachine",
    "RoundState",
    "SpecledgerError",
    "Trigger",
    "Violation",
]
