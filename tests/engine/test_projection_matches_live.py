"""The log alone reproduces every slot's state: the projection of the events equals the
live slot (tokens, position, digest) at every turn end, for every strategy x EOG policy x
replay policy."""

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import EogPolicy, ReplayPolicy, RunConfig, Strategy
from engine.session import MemoryJournal, Session
from eventlog import project


@settings(max_examples=40, deadline=None)
@given(
    strategy=st.sampled_from(list(Strategy)),
    eog=st.sampled_from(list(EogPolicy)),
    replay=st.sampled_from(list(ReplayPolicy)),
    seed=st.integers(0, 2**31),
    acceptance=st.floats(0.05, 0.99),
    draft_max=st.integers(1, 12),
    tie_flip_rate=st.sampled_from([0.0, 0.2]),
    slots=st.integers(1, 2),
    ctx_every=st.sampled_from([16, 64, 4096]),
)
def test_projection_equals_live_state_at_every_turn_end(
    strategy: Strategy, eog: EogPolicy, replay: ReplayPolicy, seed: int, acceptance: float,
    draft_max: int, tie_flip_rate: float, slots: int, ctx_every: int,
) -> None:
    config = RunConfig(
        strategy=strategy, eog_policy=eog, replay_policy=replay, seed=seed,
        acceptance=acceptance, draft_max=draft_max, tie_flip_rate=tie_flip_rate, slots=slots,
        turns=3, prompt_tokens=40, question_tokens=8, answer_tokens=30,
        ctx_checkpoint_every=ctx_every, ctx_checkpoints=3,
    )
    journal = MemoryJournal()
    session = Session(config, journal)
    for _ in range(config.turns):
        for slot in session.slots:
            session.run_turn(slot)
            views = project(journal.events)
            started = [s for s in session.slots if session.services.work[s.id].machine.turn > 0]
            assert sorted(views) == [s.id for s in started]
            for live in started:
                view = views[live.id]
                expected = session.view(live)
                assert view.tokens == expected["tokens"]
                assert view.position == expected["position"]
                assert view.digest == expected["digest"]
                assert view.state.value == expected["state"]
