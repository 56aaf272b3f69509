"""`--compile`: the one-token decode step through torch.compile answers as the eager
model does, and the state audit (an eager twin) passes after every commit."""

import pytest
import torch

from engine.config import RunConfig
from engine.hybrid.backend import TorchBackend
from engine.hybrid.compiled import decode_step
from engine.hybrid.loader import LoadedCheckpoint, load_checkpoint
from engine.session import MemoryJournal, Session
from fsm.states import Trigger

TOL = 1e-5  # relative to the peak: fused loops round differently, not more coarsely


@pytest.fixture(scope="module")
def target() -> LoadedCheckpoint:
    return load_checkpoint("shipped:target")


def test_steps_match_the_eager_forward(target: LoadedCheckpoint) -> None:
    model = target.model
    eager, compiled = model.new_state(), model.new_state()
    prompt = torch.arange(97, 137).view(1, -1)
    model(prompt, eager)
    model(prompt, compiled)
    for token in (3, 100, 58, 200, 7):
        ids = torch.tensor([[token]])
        want = model(ids, eager)
        got, hidden = decode_step(model, ids, compiled)
        assert (got - want).abs().max() <= TOL * want.abs().max()
        assert hidden.shape == (1, 1, model.config.hidden_size)
        assert compiled.position == eager.position
        assert compiled.diff(eager) <= TOL


@pytest.mark.parametrize(("drafter", "strategy"), [("none", "checkpoint"),
                                                   ("ngram-simple", "input_replay"),
                                                   ("draft-model", "per_token"),
                                                   ("mtp", "checkpoint")])
def test_a_compiled_session_answers_as_the_eager_one(target: LoadedCheckpoint, drafter: str,
                                                     strategy: str) -> None:
    answers = {}
    for compile_ in (False, True):
        config = RunConfig(backend="torch", model="shipped:target", drafter=drafter,
                           strategy=strategy, turns=2, max_answer_tokens=32, seed=3,
                           compile=compile_)
        journal = MemoryJournal()
        Session(config, journal, backend=TorchBackend(config, target)).run()
        assert not [e for e in journal.events if e.trigger is Trigger.INVARIANT_VIOLATION]
        answers[compile_] = [t for e in journal.events if e.trigger is Trigger.COMMIT
                             for t in e.payload.get("append", [])]
    assert answers[True] == answers[False] and answers[True]
