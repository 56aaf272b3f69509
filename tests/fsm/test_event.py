"""An event's row: every field, in field order (to_row spells them out for speed, so a
field added to Event must be added there too)."""

from dataclasses import fields

from fsm.event import Event
from fsm.states import RoundState, Trigger


def test_a_row_holds_every_field_in_order_with_enums_as_strings() -> None:
    ev = Event(seq=3, slot=1, turn=2, round=5, trigger=Trigger.COMMIT,
               source=RoundState.ACCEPT, dest=RoundState.COMMIT, t=1.5, duration=0.25,
               payload={"append": [7]})
    row = ev.to_row()
    assert list(row) == [f.name for f in fields(Event)]
    assert row == {"seq": 3, "slot": 1, "turn": 2, "round": 5, "trigger": Trigger.COMMIT.value,
                   "source": RoundState.ACCEPT.value, "dest": RoundState.COMMIT.value,
                   "t": 1.5, "duration": 0.25, "payload": {"append": [7]}}
