"""The drafter interface and the registry that builds one from a run configuration."""

from collections.abc import Sequence
from typing import Protocol

from engine.backend import Backend, SeqState
from engine.config import RunConfig
from engine.errors import ConfigError


class Drafter(Protocol):
    """Proposes up to `k` tokens to follow a slot's committed tokens."""

    name: str

    def propose(
        self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
    ) -> list[int]:
        """Draft tokens to follow `tokens` (the slot's committed tokens); `state` is the
        target's live state at position len(tokens) - 1."""

    def on_commit(self, tokens: Sequence[int]) -> None:
        """The slot committed up to `tokens`: drafters with state follow it."""


def make_drafter(config: RunConfig, slot: int) -> Drafter | None:
    """The configured drafter for `slot`, or None for plain decoding."""
    if config.drafter == "none":
        return None
    if config.drafter == "synthetic":
        from engine.drafters.synthetic import SyntheticDrafter

        return SyntheticDrafter(config.acceptance, config.seed, slot)
    raise ConfigError(f"drafter: '{config.drafter}' is not implemented yet")
