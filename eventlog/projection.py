"""Projection: fold events into each slot's state at any sequence number, without a model."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fsm.event import APPEND, DIGEST, POSITION, TRIM, Event
from fsm.states import RoundState, Trigger

_COMMIT = Trigger.COMMIT
_RESTORE = Trigger.RESTORE
_CTX_RESTORE = Trigger.CTX_RESTORE
_VIOLATION = Trigger.INVARIANT_VIOLATION


@dataclass(slots=True)
class SlotView:
    """One slot as the log says it is after the events folded so far.

    `tokens` are the committed tokens and `position` how many the model state has
    consumed (docs/design.md#positions); `digest` is the state digest at `position`.
    `rounds` counts commits; `drafted` and `accepted` sum the payload counts; `restores`
    and `ctx_restores` count those events; `reprefill_tokens` sums the tokens processed
    again after a context restore; `violations` holds the invariant-violation payloads.
    """

    slot: int
    tokens: list[int] = field(default_factory=list)
    position: int = 0
    state: RoundState = RoundState.IDLE
    digest: str = ""
    turn: int = 0
    round: int = 0
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    restores: int = 0
    ctx_restores: int = 0
    reprefill_tokens: int = 0
    violations: list[dict[str, Any]] = field(default_factory=list)


class Projector:
    """Folds events one at a time into `slots` (slot number -> `SlotView`), in place."""

    def __init__(self) -> None:
        self.slots: dict[int, SlotView] = {}

    def apply(self, event: Event) -> None:
        """Fold one event into its slot's view."""
        view = self.slots.get(event.slot)
        if view is None:
            view = self.slots[event.slot] = SlotView(event.slot)
        payload = event.payload
        if payload:
            # Order matters: an event may cut the tokens back and then append to the cut.
            if TRIM in payload:
                del view.tokens[payload[TRIM] :]
            if APPEND in payload:
                view.tokens.extend(payload[APPEND])
            if POSITION in payload:
                view.position = payload[POSITION]
            if DIGEST in payload:
                view.digest = payload[DIGEST]
            if "drafted" in payload:
                view.drafted += payload["drafted"]
            if "accepted" in payload:
                view.accepted += payload["accepted"]
        view.state = event.dest
        view.turn = event.turn
        view.round = event.round
        trigger = event.trigger
        if trigger is _COMMIT:
            view.rounds += 1
        elif trigger is _RESTORE:
            view.restores += 1
        elif trigger is _CTX_RESTORE:
            view.ctx_restores += 1
            view.reprefill_tokens += payload.get("reprefill", 0)
        elif trigger is _VIOLATION:
            view.violations.append(payload)


def project(events: Iterable[Event], at: int | None = None) -> dict[int, SlotView]:
    """Each slot's view after the events through seq `at` (inclusive), or after all of them."""
    projector = Projector()
    apply = projector.apply
    if at is None:
        for event in events:
            apply(event)
    else:
        for event in events:
            if event.seq > at:
                break
            apply(event)
    return projector.slots
