"""`RoundMachine`: one slot's round transaction on `transitions`, with one recording hook.

Every fired trigger goes through `fire`, and the machine-wide `after_state_change` hook
turns it into exactly one `Event` handed to the sink. Guards raise specific exceptions
instead of silently refusing, because a refused transition is an engine bug.
"""

from collections.abc import Callable
from typing import Any, Protocol

from transitions import Machine, MachineError
from transitions.core import EventData

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


class _Model:
    """The object `transitions` decorates with `state` and trigger methods."""

    state: str


class RoundMachine:
    """The round state machine of one slot.

    `turn` and `round` are stamped on every event; the engine advances them. `clock`
    returns the backend's time in seconds since the session started; `next_seq` hands
    out the session-wide sequence numbers.
    """

    def __init__(
        self,
        slot: int,
        sink: EventSink,
        next_seq: Callable[[], int],
        clock: Callable[[], float],
    ) -> None:
        self.slot = slot
        self.turn = 0
        self.round = 0
        self._sink = sink
        self._next_seq = next_seq
        self._clock = clock
        self._model = _Model()
        self._last: Event | None = None
        self._machine = Machine(
            model=self._model,
            states=[s.value for s in RoundState],
            initial=RoundState.IDLE.value,
            auto_transitions=False,
            send_event=True,
            after_state_change=self._record,
        )
        for trigger, sources, dest in TRANSITIONS:
            before: list[Callable[[EventData], None]] = []
            if trigger in (Trigger.VERIFY, Trigger.RETRY):
                before.append(_need_draft)
            elif trigger is Trigger.COMMIT:
                before.append(_need_tokens)
            self._machine.add_transition(
                trigger.value,
                [s.value for s in sources],
                "=" if dest is None else dest.value,
                before=before,
            )

    @property
    def state(self) -> RoundState:
        """The current state."""
        return RoundState(self._model.state)

    def fire(self, trigger: Trigger, duration: float = 0.0, **payload: Any) -> Event:
        """Fire `trigger`, record it, and return the event it became."""
        try:
            getattr(self._model, trigger.value)(payload=payload, duration=duration)
        except MachineError as exc:
            raise _refusal(trigger, self.state) from exc
        assert self._last is not None
        return self._last

    def _record(self, ev: EventData) -> None:
        event = Event(
            seq=self._next_seq(),
            slot=self.slot,
            turn=self.turn,
            round=self.round,
            trigger=Trigger(ev.event.name),
            source=RoundState(ev.transition.source),
            dest=RoundState(ev.transition.dest),
            t=self._clock(),
            duration=ev.kwargs["duration"],
            payload=ev.kwargs["payload"],
        )
        self._last = event
        self._sink.append(event)


def _need_draft(ev: EventData) -> None:
    if not ev.kwargs["payload"].get("drafts"):
        raise EmptyDraftError("verify needs at least one draft token; a plain step is 'decode'")


def _need_tokens(ev: EventData) -> None:
    if not ev.kwargs["payload"].get(APPEND):
        raise EmptyCommitError("commit of zero tokens: every round must commit at least one")


def _refusal(trigger: Trigger, state: RoundState) -> InvalidTransitionError:
    if trigger is Trigger.REPLAY:
        return ReplayWithoutRestoreError(f"replay in state '{state}' without a restore first")
    return InvalidTransitionError(f"'{trigger}' is not allowed in state '{state}'")
