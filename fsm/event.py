"""The event record: one row of the log per transition."""

from dataclasses import dataclass, field
from typing import Any

from fsm.states import RoundState, Trigger

# Payload keys with a fixed meaning: the projection folds them into slot state.
TRIM = "trim"          # int: cut the slot's tokens to this length (before APPEND)
APPEND = "append"      # list[int]: tokens appended to the slot's committed tokens
POSITION = "position"  # int: tokens consumed by the model state after the event
DIGEST = "digest"      # str: digest of the recurrent state at POSITION


@dataclass(slots=True)
class Event:
    """One transition of one slot's round machine. Treat it as immutable; it is not
    frozen only because every transition builds one and a frozen dataclass's `__init__`
    costs three times as much.

    `seq` is unique within the session and strictly increasing in emission order; `t`
    and `duration` are seconds on the backend's clock (simulated for `sim`, wall for
    `torch`), `t` counted from the session's start. `payload` is the trigger's payload
    type (`fsm.payloads.PAYLOADS`, docs/events.md): a reader annotates it as that type.
    """

    seq: int
    slot: int
    turn: int
    round: int
    trigger: Trigger
    source: RoundState
    dest: RoundState
    t: float
    duration: float
    payload: Any = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        """Plain-typed mapping (enums as strings) for JSON output, in field order."""
        # Spelled out: the golden hashes and the JSON output call it once per event.
        return {"seq": self.seq, "slot": self.slot, "turn": self.turn, "round": self.round,
                "trigger": self.trigger.value, "source": self.source.value,
                "dest": self.dest.value, "t": self.t, "duration": self.duration,
                "payload": self.payload}
