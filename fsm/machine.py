"""`RoundMachine`: one slot's round transaction, defined on `transitions`, with one
recording path.

The legal moves are those of a `transitions.Machine` built from `TRANSITIONS`; the
machine is built once per process and compiled into a (state, trigger) -> state table.
Firing through that table, the event included, costs 0.7 us where a bare `transitions`
trigger costs 7.4 us (bench/results/recorder/results.md), and a 20-turn conversation with
16k-token answers fires 356k of them (bench/results/conversation/results.json); a test walks
random trigger sequences through both and requires the same states and refusals.
Every fired trigger becomes exactly one `Event` handed to the sink. Guards raise
specific exceptions instead of silently refusing, because a refused transition is an
engine bug.
"""

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Protocol

from transitions import Machine

from fsm.errors import (
    EmptyCommitError,
    EmptyDraftError,
    InvalidTransitionError,
    ReplayWithoutRestoreError,
)
from fsm.event import APPEND, Event
from fsm.states import TRANSITIONS, RoundState, Trigger


class EventSink(Protocol):
    """Where events go: the recorder, or a list in tests."""

    def append(self, event: Event) -> None:
        """Take one event (in seq order)."""


def reference_machine(model: object = None, kind: type[Machine] = Machine,
                      **options: Any) -> Machine:
    """The round machine as `transitions` defines it (reflexive notes stay put): a `kind`
    of `Machine` with its `options` (viz/machine.py draws it with a `GraphMachine`)."""
    m = kind(model=model, states=[s.value for s in RoundState],
             initial=RoundState.IDLE.value, auto_transitions=False, **options)
    for trigger, sources, dest in TRANSITIONS:
        m.add_transition(trigger.value, [s.value for s in sources],
                         "=" if dest is None else dest.value)
    return m


@cache
def transition_table() -> dict[tuple[RoundState, Trigger], RoundState]:
    """Every legal (state, trigger) and its destination, read off `reference_machine`."""
    return {(RoundState(source), Trigger(name)): RoundState(tr.dest or source)
            for name, event in reference_machine().events.items()
            for source, transitions in event.transitions.items() for tr in transitions}


class RoundMachine:
    """The round state machine of one slot.

    `turn` and `round` are stamped on every event; the engine advances them. `clock`
    returns the backend's time in seconds since the session started; `next_seq` hands
    out the session-wide sequence numbers.
    """

    def __init__(self, slot: int, sink: EventSink, next_seq: Callable[[], int],
                 clock: Callable[[], float]) -> None:
        self.slot = slot
        self.turn = 0
        self.round = 0
        self._sink = sink
        self._next_seq = next_seq
        self._clock = clock
        self._table = transition_table()
        self._state = RoundState.IDLE

    @property
    def state(self) -> RoundState:
        """The current state."""
        return self._state

    def fire(self, trigger: Trigger, duration: float = 0.0,
             payload: Mapping[str, Any] | None = None) -> Event:
        """Fire `trigger` with its payload (`trigger`'s type in `fsm.payloads`), record
        it, and return the event it became. The payload is stored as given, not copied."""
        if payload is None:
            payload = {}
        source = self._state
        dest = self._table.get((source, trigger))
        if dest is None:
            raise _refusal(trigger, source)
        if trigger is Trigger.VERIFY or trigger is Trigger.RETRY:
            if not payload.get("drafts"):
                raise EmptyDraftError(
                    "verify needs at least one draft token; a plain step is 'decode'")
        elif trigger is Trigger.COMMIT and not payload.get(APPEND):
            raise EmptyCommitError("commit of zero tokens: every round must commit at least one")
        self._state = dest
        event = Event(self._next_seq(), self.slot, self.turn, self.round, trigger, source,
                      dest, self._clock(), duration, payload)
        self._sink.append(event)
        return event


def _refusal(trigger: Trigger, state: RoundState) -> InvalidTransitionError:
    if trigger is Trigger.REPLAY:
        return ReplayWithoutRestoreError(f"replay in state '{state}' without a restore first")
    return InvalidTransitionError(f"'{trigger}' is not allowed in state '{state}'")
