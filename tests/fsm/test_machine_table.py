"""The compiled table the engine fires through is exactly `transitions`' machine."""

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from transitions import MachineError

from fsm import InvalidTransitionError, RoundMachine, RoundState, Trigger
from fsm.machine import reference_machine, transition_table
from fsm.states import TRANSITIONS


class _Model:
    state: str


def test_table_holds_every_declared_move() -> None:
    table = transition_table()
    declared = {(src, trig) for trig, sources, _ in TRANSITIONS for src in sources}
    assert set(table) == declared
    assert table[RoundState.VERIFY, Trigger.INVARIANT_VIOLATION] is RoundState.VERIFY
    assert table[RoundState.RESTORE, Trigger.RETRY] is RoundState.VERIFY


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list(Trigger)), max_size=40))
def test_same_states_and_refusals_as_transitions(triggers: list[Trigger]) -> None:
    model = _Model()
    reference_machine(model)
    seq = itertools.count(1)
    ours = RoundMachine(0, [], seq.__next__, lambda: 0.0)
    # payloads that satisfy the guards, so only the table decides
    payload = {"drafts": [1], "append": [1]}
    for trig in triggers:
        try:
            getattr(model, trig.value)()
            expected: str | None = model.state
        except MachineError:
            expected = None
        try:
            ours.fire(trig, 0.0, payload)
            got: str | None = ours.state.value
        except InvalidTransitionError:
            got = None
        assert got == expected, f"{trig} diverged"
        if expected is None:
            assert ours.state.value == model.state
