"""Invariant 6 (draft_state) during a run: a drafter whose own state is not where the
slot's tokens and its drafts put it is a violation at the commit of that round."""

from collections.abc import Sequence

import pytest

from engine.backend import Backend, SeqState
from engine.config import BackendKind, RunConfig
from engine.drafters.base import ChainDrafter, Drafter
from engine.session import MemoryJournal, Session
from fsm.errors import InvariantViolationError
from fsm.invariants import Invariant
from fsm.states import Trigger

CONFIG = RunConfig(backend=BackendKind.SIM, turns=2, prompt_tokens=64, question_tokens=8,
                   answer_tokens=32, drafter="synthetic", seed=5)


class StatefulDrafter:
    """Wraps a drafter and reports a draft state `lag` tokens behind where it belongs
    (0: a correct state), as the draft-model drafter reports its own."""

    def __init__(self, inner: Drafter, lag: int) -> None:
        self.inner, self.lag, self.name = inner, lag, "stateful"
        self.position = 0

    def propose(self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
                ) -> list[int]:
        """The inner drafter's drafts; the state position as if it fed them to itself."""
        out = self.inner.propose(backend, state, tokens, k)
        self.position = len(tokens) - 1 + len(out) - self.lag
        return out

    def on_commit(self, drafted: int, accepted: int) -> None:
        """Passed on."""
        self.inner.on_commit(drafted, accepted)

    def new_request(self) -> None:
        """Passed on."""
        self.inner.new_request()

    def stats(self) -> dict[str, int]:
        """The draft state's position."""
        return {"draft_position": self.position}


def run(lag: int, chain: bool = False, strict: bool = False) -> list[dict]:
    journal = MemoryJournal()
    session = Session(CONFIG.replace(strict=strict), journal)
    for work in session.services.work:
        assert work.drafter is not None
        work.drafter = StatefulDrafter(work.drafter, lag)
        if chain:
            work.drafter = ChainDrafter([work.drafter])
    session.run()
    return [e.payload for e in journal.events if e.trigger is Trigger.INVARIANT_VIOLATION]


def test_a_draft_state_where_it_belongs_is_no_violation() -> None:
    assert run(lag=0) == []


def test_a_lagging_draft_state_is_a_violation_at_each_speculative_commit() -> None:
    found = run(lag=1)
    assert found and {v["invariant"] for v in found} == {Invariant.DRAFT_STATE.value}
    first = found[0]["details"]
    assert first["expected"] - first["draft_position"] == 1


def test_strict_stops_at_the_first_draft_state_violation() -> None:
    with pytest.raises(InvariantViolationError, match="draft_state"):
        run(lag=2, strict=True)


def test_in_a_chain_the_member_that_drafted_is_judged() -> None:
    assert run(lag=0, chain=True) == []
    found = run(lag=1, chain=True)
    assert found and {v["invariant"] for v in found} == {Invariant.DRAFT_STATE.value}
