"""The workload a session runs: the user's question per slot and turn, handed to the
`Session` beside the backend (a backend is the model, not the traffic it serves)."""

from typing import Protocol

from engine.config import RunConfig
from engine.sim.hashing import keyed
from engine.sim.vocab import VOCAB


class Conversation(Protocol):
    """What the user asks in each slot's turns (turn 1's message is the long one)."""

    def question(self, slot: int, turn: int) -> list[int]:
        """The user's message for `slot`'s `turn` (1-based), as token ids."""


class SimConversation:
    """Ordinary sim tokens keyed by (seed, slot, turn)."""

    def __init__(self, config: RunConfig) -> None:
        self.seed = config.seed
        self.lengths = (config.prompt_tokens, config.question_tokens)

    def question(self, slot: int, turn: int) -> list[int]:
        """`prompt_tokens` tokens on turn 1, `question_tokens` after."""
        n = self.lengths[turn != 1]
        key = keyed(self.seed, slot, turn, 0x0E57)
        return [keyed(key, i) % VOCAB for i in range(n)]


class HeldOutConversation:
    """Held-out stdlib functions to complete, one conversation per slot (the corpus the
    shipped models were not trained on), chosen by (seed, slot)."""

    def __init__(self, config: RunConfig) -> None:
        self.seed, self.turns = config.seed, config.turns
        self._slots: dict[int, list[list[int]]] = {}

    def question(self, slot: int, turn: int) -> list[int]:
        """The slot's conversation, built on first use (parsing the corpus is slow)."""
        if slot not in self._slots:
            from engine.training.conversations import conversation_prompts

            self._slots[slot] = conversation_prompts(self.seed * 1009 + slot, self.turns)
        return self._slots[slot][turn - 1]

