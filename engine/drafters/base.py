"""The drafter interface, the no-op base drafters build on, and the chain of drafters."""

from collections.abc import Sequence
from typing import Protocol

from engine.backend import Backend, SeqState


class Drafter(Protocol):
    """Proposes up to `k` tokens to follow a slot's committed tokens."""

    name: str

    def propose(
        self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
    ) -> list[int]:
        """Draft tokens to follow `tokens` (the slot's committed tokens); `state` is the
        target's live state at position len(tokens) - 1. An empty list means no draft."""

    def on_commit(self, drafted: int, accepted: int) -> None:
        """Feedback after the round that verified this drafter's proposal."""

    def new_request(self) -> None:
        """A new request (turn) begins in the slot."""

    def stats(self) -> dict[str, int]:
        """Numbers worth recording with each draft (its own state's position...)."""


class BaseDrafter:
    """No-op defaults for drafters without feedback, state or statistics."""

    def on_commit(self, drafted: int, accepted: int) -> None:
        """Nothing to learn."""

    def new_request(self) -> None:
        """Nothing to reset."""

    def stats(self) -> dict[str, int]:
        """Nothing to report."""
        return {}


class ChainDrafter(BaseDrafter):
    """Several drafters in order of precedence (`ngram-mod,mtp`): the first that has a
    draft drafts; feedback goes to the one that drafted. `mtp` and `draft-model` always
    draft, so a member named after either never runs (`mtp,ngram-mod` is `mtp` alone)."""

    def __init__(self, drafters: Sequence[Drafter]) -> None:
        self.drafters = list(drafters)
        self.name = ",".join(d.name for d in drafters)
        # The member whose draft the last `propose` returned (None: nobody drafted).
        self.used: Drafter | None = None

    def propose(
        self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
    ) -> list[int]:
        """The first non-empty draft."""
        for d in self.drafters:
            draft = d.propose(backend, state, tokens, k)
            if draft:
                self.used = d
                return draft
        self.used = None
        return []

    def on_commit(self, drafted: int, accepted: int) -> None:
        """Forward feedback to the drafter that drafted."""
        if self.used is not None:
            self.used.on_commit(drafted, accepted)

    def new_request(self) -> None:
        """Every drafter hears of it."""
        for d in self.drafters:
            d.new_request()

    def stats(self) -> dict[str, int]:
        """Everyone's numbers."""
        return {key: value for d in self.drafters for key, value in d.stats().items()}

