"""The batched schedule on the shipped model: three slots whose MTP drafts are verified in
one forward per step (the torch backend's `verify_batch`) answer as the same conversations
run one slot after another, with the state audit clean and every forward's rows marked."""

import pytest

from engine.config import RunConfig, Schedule
from engine.session import MemoryJournal, Session
from fsm.event import Event
from fsm.payload_schema import check_events
from fsm.states import Trigger

pytest.importorskip("torch")


def _run(config: RunConfig) -> tuple[list[list[int]], list[Event]]:
    journal = MemoryJournal()
    session = Session(config, journal)
    session.run()
    assert not check_events(journal.events)
    return [list(s.transcript) for s in session.slots], journal.events


def test_batched_torch_slots_answer_as_sequential_ones() -> None:
    # input_replay: each row keeps its recorded inputs, and the MTP head reads the hidden
    # states every row's verify files for its slot
    config = RunConfig(backend="torch", slots=3, turns=2, max_answer_tokens=24, seed=1,
                       strategy="input_replay", drafter="mtp")
    sequential, _ = _run(config)
    batched, events = _run(config.replace(schedule=Schedule.BATCHED))
    assert batched == sequential
    assert not [e for e in events if e.trigger is Trigger.INVARIANT_VIOLATION]
    forwards = [e for e in events if e.trigger in (Trigger.VERIFY, Trigger.DECODE)]
    assert max(e.payload["batch_slots"] for e in forwards) == 3
