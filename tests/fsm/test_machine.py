"""The round machine: guards refuse with specific errors; every transition is one event."""

import itertools

import pytest

from fsm import (
    EmptyCommitError,
    EmptyDraftError,
    InvalidTransitionError,
    ReplayWithoutRestoreError,
    RoundMachine,
    RoundState,
    Trigger,
)
from fsm.states import TRANSITIONS


def _machine() -> tuple[RoundMachine, list]:
    events: list = []
    seq = itertools.count(1)
    return RoundMachine(0, events, seq.__next__, lambda: 1.5), events


def _to_reject(m: RoundMachine) -> None:
    m.fire(Trigger.BEGIN)
    m.fire(Trigger.DRAFT, 0.0, {"drafts": [5, 6]})
    m.fire(Trigger.VERIFY, 0.0, {"drafts": [5, 6]})
    m.fire(Trigger.REJECT)


def test_full_round_records_one_event_per_transition() -> None:
    m, events = _machine()
    _to_reject(m)
    m.fire(Trigger.RESTORE)
    m.fire(Trigger.REPLAY)
    m.fire(Trigger.COMMIT, 0.0, {"append": [5]})
    m.fire(Trigger.NEXT)
    assert [e.trigger for e in events] == [
        Trigger.BEGIN, Trigger.DRAFT, Trigger.VERIFY, Trigger.REJECT, Trigger.RESTORE,
        Trigger.REPLAY, Trigger.COMMIT, Trigger.NEXT,
    ]
    assert [e.seq for e in events] == list(range(1, 9))
    assert events[0].source is RoundState.IDLE and events[0].dest is RoundState.CHECKPOINT
    assert events[-1].dest is RoundState.IDLE and m.state is RoundState.IDLE
    assert all(e.t == 1.5 for e in events)


def test_verify_without_draft_is_refused() -> None:
    m, events = _machine()
    m.fire(Trigger.BEGIN)
    m.fire(Trigger.DRAFT, 0.0, {"drafts": []})
    with pytest.raises(EmptyDraftError):
        m.fire(Trigger.VERIFY, 0.0, {"drafts": []})
    assert m.state is RoundState.SPECULATE
    assert len(events) == 2  # a refused transition is not recorded


def test_commit_of_zero_tokens_is_refused() -> None:
    m, _ = _machine()
    _to_reject(m)
    m.fire(Trigger.RESTORE)
    m.fire(Trigger.REPLAY)
    with pytest.raises(EmptyCommitError):
        m.fire(Trigger.COMMIT, 0.0, {"append": []})


def test_replay_without_restore_is_refused() -> None:
    m, _ = _machine()
    _to_reject(m)
    with pytest.raises(ReplayWithoutRestoreError):
        m.fire(Trigger.REPLAY)
    assert m.state is RoundState.REJECT


def test_unknown_move_is_an_invalid_transition() -> None:
    m, _ = _machine()
    with pytest.raises(InvalidTransitionError, match="'accept' is not allowed in state 'idle'"):
        m.fire(Trigger.ACCEPT)


def test_notes_are_reflexive_events() -> None:
    m, events = _machine()
    m.fire(Trigger.BEGIN)
    m.fire(Trigger.INVARIANT_VIOLATION, 0.0, {"invariant": "state_truth"})
    assert m.state is RoundState.CHECKPOINT
    assert events[-1].source is events[-1].dest is RoundState.CHECKPOINT


def test_every_trigger_has_a_transition() -> None:
    assert {t for t, _, _ in TRANSITIONS} == set(Trigger)
