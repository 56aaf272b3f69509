"""A newcomer's rollback strategy is one class: here `Recompute`, which keeps nothing
and, on a rejection, rebuilds the state from scratch (what a server without state copies
does). A session settles with it on the sim and torch backends and answers exactly as
plain decoding does, its state true at every commit."""

import pytest

from engine.backend import Keep
from engine.config import RunConfig
from engine.session import MemoryJournal, Session
from engine.speculative import Block
from engine.strategies import RollbackStrategy, Round
from fsm.event import Event
from fsm.payload_schema import check_events
from fsm.states import Trigger


class Recompute(RollbackStrategy):
    """Forget the state on a rejection and run the whole accepted history again."""

    name = "recompute"
    keep = Keep.NOTHING

    def roll_back(self, r: Round, block: Block) -> bool:
        b, m = r.backend, r.work.machine
        t = b.now()
        b.reset(r.state)
        m.fire(Trigger.RESTORE, b.now() - t, {"mode": "reset", "position": 0})
        # The slot's tokens but the last (consumed before the round), then the batch's
        # accepted positions (the last committed token first).
        history = [*r.slot.tokens[:r.position], *r.batch[:block.consumed]]
        t = b.now()
        b.forward(r.state, history)
        m.fire(Trigger.REPLAY, b.now() - t, {"mode": "recompute", "tokens": len(history)})
        return True


def _run(config: RunConfig, strategy: RollbackStrategy | None = None
         ) -> tuple[list[list[int]], list[Event]]:
    journal = MemoryJournal()
    session = Session(config, journal, strategy=strategy)
    session.run()
    assert not check_events(journal.events)
    return [list(s.transcript) for s in session.slots], journal.events


@pytest.mark.parametrize("config", [
    RunConfig(backend="sim", slots=2, turns=2, acceptance=0.6, prompt_tokens=48,
              answer_tokens=60, seed=3),
    RunConfig(backend="sim", slots=2, turns=2, acceptance=0.6, prompt_tokens=48,
              answer_tokens=60, seed=3, schedule="batched"),
    RunConfig(backend="torch", turns=2, max_answer_tokens=24, seed=1,
              drafter="ngram-simple"),
], ids=["sim", "sim-batched", "torch"])
def test_a_strategy_defined_here_is_lossless(config: RunConfig) -> None:
    if config.backend.value == "torch":
        pytest.importorskip("torch")
    plain, _ = _run(config.replace(drafter="none"))
    answers, events = _run(config, Recompute())
    assert answers == plain
    begins = [e for e in events if e.trigger is Trigger.BEGIN]
    assert begins and {e.payload["strategy"] for e in begins} == {"recompute"}
    replays = [e for e in events if e.trigger is Trigger.REPLAY]
    assert replays and {e.payload["mode"] for e in replays} == {"recompute"}
    assert not [e for e in events if e.trigger is Trigger.INVARIANT_VIOLATION]
