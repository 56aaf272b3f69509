"""#28060 under batching: near-ties whose argmax depends on the forward's shape are what a
batch changes (its total tokens), so a `reverify` replay disagrees with a verification
that shared its forward with other slots, and the retry (batched with whatever else
retries) can disagree again. The forward-progress guard still ends every livelock, and
the postmortem names it; without near-ties batching changes no token."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import RunConfig
from engine.session import MemoryJournal, Session
from eventlog import open_db
from eventlog.postmortem import Kind, postmortem_session
from fsm.event import Event
from fsm.states import Trigger
from specledger.api import run_session

LIVELOCKS = RunConfig(backend="sim", slots=4, schedule="batched", strategy="checkpoint",
                      replay_policy="reverify", tie_flip_rate=0.3, acceptance=0.9,
                      draft_max=8, turns=2, prompt_tokens=32, question_tokens=8,
                      answer_tokens=60, seed=2)


class _Budget(Exception):
    pass


class _Capped(MemoryJournal):
    """A journal that stops the engine after `cap` events."""

    cap = 30_000

    def append(self, event: Event) -> None:
        super().append(event)
        if len(self.events) >= self.cap:
            raise _Budget


def _events(config: RunConfig) -> tuple[Session, list[Event]]:
    journal = MemoryJournal()
    session = Session(config, journal)
    session.run()
    return session, journal.events


def test_without_guard_a_batched_slot_livelocks() -> None:
    journal = _Capped()
    with pytest.raises(_Budget):
        Session(LIVELOCKS.replace(livelock_guard=0), journal).run()
    tail = journal.events[-5000:]
    restores = [e for e in tail if e.trigger is Trigger.RESTORE]
    assert len(restores) > 1000
    stuck: dict[int, set[int]] = {}
    for e in restores:
        stuck.setdefault(e.slot, set()).add(e.payload["position"])
    assert all(len(p) == 1 for p in stuck.values())  # each stuck slot: one checkpoint
    assert not [e for e in tail if e.trigger is Trigger.COMMIT]
    retries = [e for e in tail if e.trigger is Trigger.RETRY]
    assert retries and all("batch_id" in e.payload for e in retries)


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_the_guard_ends_every_batched_livelock_and_the_postmortem_names_it(
        tmp_path: object, seed: int) -> None:
    config = LIVELOCKS.replace(seed=seed, livelock_guard=3)
    _, events = _events(config)
    livelocks = [e for e in events if e.trigger is Trigger.LIVELOCK]
    assert livelocks  # near-ties under batching livelock the reverify replay
    # every round of every slot committed: the guard ended each livelock
    begun = {(e.slot, e.turn, e.round) for e in events if e.trigger in (Trigger.BEGIN,
                                                                        Trigger.DECODE)}
    committed = {(e.slot, e.turn, e.round) for e in events if e.trigger is Trigger.COMMIT}
    assert begun == committed
    assert [e.trigger for e in events if e.trigger is Trigger.END_TURN] == [Trigger.END_TURN] * (
        config.slots * config.turns)
    for e in livelocks:
        assert e.payload["cycle"][:4] == ["verify", "reject", "restore", "replay"]
        assert e.payload["restores"] >= config.livelock_guard
    assert not [e for e in events if e.trigger is Trigger.INVARIANT_VIOLATION]
    # the slots' retries share forwards with each other
    assert max(e.payload["batch_slots"] for e in events if e.trigger is Trigger.RETRY) > 1

    db = f"sqlite:///{tmp_path}/ledger.db"
    sid = run_session(config, db).session_id
    pm = postmortem_session(open_db(db, create=False), sid)
    found = [f for f in pm.findings if f.kind is Kind.REPLAY_LIVELOCK]
    assert len(found) == 1
    assert found[0].numbers["rounds"] == len(livelocks)
    assert found[0].numbers["cycle"].startswith("verify -> reject -> restore -> replay")
    assert "reverify" in found[0].explanation
    assert not [f for f in pm.findings if f.kind is Kind.INVARIANT_VIOLATION]


def test_near_ties_are_what_batching_changes() -> None:
    """The same conversations: without near-ties the batched answers are the sequential
    ones; with them, some answer changes (the forward's shape tips a tie)."""
    base = LIVELOCKS.replace(replay_policy="reconstruct", tie_flip_rate=0.0)

    def answers(config: RunConfig) -> list[list[int]]:
        return [s.transcript for s in _events(config)[0].slots]

    assert answers(base) == answers(base.replace(schedule="sequential"))
    ties = base.replace(tie_flip_rate=0.3)
    assert answers(ties) != answers(ties.replace(schedule="sequential"))


@settings(max_examples=20, deadline=None)
@given(slots=st.integers(1, 8), guard=st.integers(1, 4), ties=st.floats(0.05, 0.6),
       draft_max=st.integers(1, 10), acceptance=st.floats(0.5, 1.0),
       seed=st.integers(0, 2**31))
def test_every_batched_round_commits_under_the_guard(
        slots: int, guard: int, ties: float, draft_max: int, acceptance: float,
        seed: int) -> None:
    config = LIVELOCKS.replace(slots=slots, livelock_guard=guard, tie_flip_rate=ties,
                               draft_max=draft_max, acceptance=acceptance, seed=seed,
                               answer_tokens=30)
    _, events = _events(config)
    rounds: dict[tuple[int, int, int], list[Trigger]] = {}
    for e in events:
        if e.round:
            rounds.setdefault((e.slot, e.turn, e.round), []).append(e.trigger)
    assert all(Trigger.COMMIT in path for path in rounds.values())
    for path in rounds.values():  # the guard ends a livelock within its bound of restores
        assert path.count(Trigger.RETRY) <= guard
    assert sum(e.trigger is Trigger.END_TURN for e in events) == slots * config.turns
