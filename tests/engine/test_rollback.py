"""Rollback strategies keep the recurrent state true; `none` is caught at once."""

import pytest

from engine.config import RunConfig, Strategy
from engine.round import run_round
from engine.sim.backend import SimBackend
from engine.sim.hashing import chain, hexdigest
from fsm.states import Trigger
from tests.engine.helpers import open_slot

ROUNDS = 1000


def _sequential_digest(tokens: list[int]) -> str:
    h = 0
    for tok in tokens:
        h = chain(h, tok)
    return hexdigest(h)


@pytest.mark.parametrize("acceptance", [0.1, 0.5, 0.95])
@pytest.mark.parametrize("strategy", ["checkpoint", "per_token", "input_replay"])
def test_state_digest_equals_sequential_digest_for_1000_rounds(
    strategy: str, acceptance: float
) -> None:
    config = RunConfig(strategy=strategy, acceptance=acceptance, answer_tokens=10**6,
                       prompt_tokens=64, draft_max=8, seed=3)
    session, slot, journal = open_slot(config)
    partial = 0
    for i in range(ROUNDS):
        block = run_round(session.services, slot)
        partial += block.accepted < 8
        session.services.work[slot.id].machine.fire(Trigger.NEXT)
        if i % 97 == 0:  # an independent recomputation, not the engine's own audit cache
            position = slot.state.position
            assert session.backend.digest(slot.state) == _sequential_digest(slot.tokens[:position])
    assert slot.state.position == len(slot.tokens) - 1
    assert partial > 10  # the rollback path really ran
    assert not [e for e in journal.events if e.trigger is Trigger.INVARIANT_VIOLATION]


def test_none_is_caught_at_the_first_partial_rejection() -> None:
    config = RunConfig(strategy=Strategy.NONE, acceptance=0.6, answer_tokens=10**6,
                       prompt_tokens=64, seed=5)
    session, slot, journal = open_slot(config)
    for _ in range(50):
        run_round(session.services, slot)
        session.services.work[slot.id].machine.fire(Trigger.NEXT)
    first_reject = next(e for e in journal.events if e.trigger is Trigger.REJECT)
    first_violation = next(e for e in journal.events
                           if e.trigger is Trigger.INVARIANT_VIOLATION)
    assert first_violation.round == first_reject.round
    assert first_violation.payload["invariant"] == "state_truth"
    rounds_before = {e.round for e in journal.events if e.trigger is Trigger.COMMIT
                     and e.round < first_reject.round}
    assert all(e.round not in rounds_before for e in journal.events
               if e.trigger is Trigger.INVARIANT_VIOLATION)


def test_strict_mode_raises_on_violation() -> None:
    from fsm.errors import InvariantViolationError

    config = RunConfig(strategy=Strategy.NONE, acceptance=0.5, answer_tokens=10**6,
                       prompt_tokens=16, strict=True)
    session, slot, _ = open_slot(config)
    with pytest.raises(InvariantViolationError, match="state_truth"):
        for _ in range(50):
            run_round(session.services, slot)
            session.services.work[slot.id].machine.fire(Trigger.NEXT)


def test_strategies_cost_differently_on_the_simulated_clock() -> None:
    times = {}
    for strategy in ("checkpoint", "per_token", "input_replay"):
        config = RunConfig(strategy=strategy, acceptance=0.5, answer_tokens=10**6,
                           prompt_tokens=64)
        session, slot, _ = open_slot(config)
        assert isinstance(session.backend, SimBackend)
        t0 = session.backend.now()
        for _ in range(200):
            run_round(session.services, slot)
            session.services.work[slot.id].machine.fire(Trigger.NEXT)
        times[strategy] = (session.backend.now() - t0) / (len(slot.tokens))
    # checkpoint pays a replay forward after every partial accept
    assert times["per_token"] < times["checkpoint"] / 1.3
    assert times["input_replay"] < times["checkpoint"] / 1.3
