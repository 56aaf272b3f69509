"""The batched schedule on the torch backend: slots whose rounds share one `verify_batch`
forward per step commit exactly the tokens of the same conversations run one slot after
another, every rollback strategy, and the state-truth audit of every batched slot
passes (each commit checked against a twin fed the committed tokens one at a time)."""

from collections import defaultdict
from pathlib import Path

import pytest

from engine.config import RunConfig
from engine.hybrid.backend import TorchBackend
from engine.hybrid.loader import LoadedCheckpoint, load_checkpoint
from engine.session import MemoryJournal, Session
from fsm.states import Trigger
from tests.engine.hybrid.test_backend import FULL, LIN, _Questions, _save_model


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> LoadedCheckpoint:
    path = tmp_path_factory.mktemp("batched-target")
    _save_model(path, 64, [LIN, FULL, LIN, LIN], seed=3)
    return load_checkpoint(path)


def _session(ckpt: LoadedCheckpoint, schedule: str, strategy: str, audit: bool
             ) -> tuple[Session, MemoryJournal]:
    config = RunConfig(backend="torch", model=str(Path(ckpt.path)), slots=3, turns=2,
                       schedule=schedule, strategy=strategy, drafter="synthetic", acceptance=0.5,
                       draft_max=4, answer_tokens=10**6, max_answer_tokens=20, audit=audit)
    journal = MemoryJournal()
    session = Session(config, journal, backend=TorchBackend(config, ckpt),
                      conversation=_Questions())
    session.run()
    return session, journal


@pytest.mark.parametrize("strategy", ["checkpoint", "per_token", "input_replay"])
def test_batched_slots_commit_what_sequential_slots_commit(target: LoadedCheckpoint,
                                                           strategy: str) -> None:
    alone, _ = _session(target, "sequential", strategy, audit=False)
    together, journal = _session(target, "batched", strategy, audit=True)
    assert [s.tokens for s in together.slots] == [s.tokens for s in alone.slots]
    lengths: dict[int, set[int]] = defaultdict(set)
    for e in journal.events:
        if "batch_id" in e.payload:
            lengths[e.payload["batch_id"]].add(e.payload["batch"])
    assert any(len(forward) > 1 for forward in lengths.values())  # ragged rows did share
    assert not [e for e in journal.events if e.trigger is Trigger.INVARIANT_VIOLATION]
