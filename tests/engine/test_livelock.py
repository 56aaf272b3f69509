"""#28060: re-verifying a replay under batch-shape-dependent numerics livelocks; the
forward-progress guard ends it and records a `livelock` event."""

import pytest

from engine.config import RunConfig
from engine.round import run_round
from engine.session import MemoryJournal
from fsm.event import Event
from fsm.states import Trigger
from tests.engine.helpers import open_slot

LIVELOCK_CONFIG = dict(strategy="checkpoint", replay_policy="reverify", tie_flip_rate=0.3,
                       acceptance=0.9, draft_max=8, answer_tokens=10**6, prompt_tokens=32,
                       seed=2)


class _Budget(Exception):
    pass


class _Capped(MemoryJournal):
    """A journal that stops the engine after `cap` events."""

    cap = 20_000

    def append(self, event: Event) -> None:
        super().append(event)
        if len(self.events) >= self.cap:
            raise _Budget


def test_without_guard_the_round_never_commits() -> None:
    session, slot, journal = open_slot(RunConfig(**LIVELOCK_CONFIG, livelock_guard=0), _Capped())
    with pytest.raises(_Budget):
        for _ in range(500):
            run_round(session.services, slot)
            session.services.work[slot.id].machine.fire(Trigger.NEXT)
    tail = journal.events[-5000:]
    restores = [e for e in tail if e.trigger is Trigger.RESTORE]
    assert len(restores) > 1000
    assert len({e.payload["position"] for e in restores}) == 1  # always the same checkpoint
    assert not [e for e in tail if e.trigger is Trigger.COMMIT]


def test_guard_ends_the_livelock_and_records_it() -> None:
    session, slot, journal = open_slot(RunConfig(**LIVELOCK_CONFIG, livelock_guard=2))
    for _ in range(300):
        run_round(session.services, slot)
        session.services.work[slot.id].machine.fire(Trigger.NEXT)
    livelocks = [e for e in journal.events if e.trigger is Trigger.LIVELOCK]
    assert livelocks
    assert livelocks[0].payload["cycle"][:4] == ["verify", "reject", "restore", "replay"]
    metrics = session.services.metrics.metrics(slot.id)
    assert metrics.rounds == 300 and metrics.livelocks == len(livelocks)
    assert not [e for e in journal.events if e.trigger is Trigger.INVARIANT_VIOLATION]


def test_reconstruct_never_livelocks() -> None:
    config = RunConfig(**{**LIVELOCK_CONFIG, "replay_policy": "reconstruct"})
    session, slot, journal = open_slot(config)
    for _ in range(300):
        run_round(session.services, slot)
        session.services.work[slot.id].machine.fire(Trigger.NEXT)
    assert not [e for e in journal.events if e.trigger is Trigger.LIVELOCK]
