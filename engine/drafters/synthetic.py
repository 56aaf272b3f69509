"""A drafter with a chosen per-token acceptance rate, on any backend with an oracle.

Each draft is the target's own token with probability `acceptance`, else a different
ordinary token. The coin is keyed by (seed, slot, position) rather than drawn from a
stream, so a re-execution, or a counterfactual with another rollback strategy, drafts the
same tokens at the same positions. Under greedy verification nothing after the first
wrong draft can be accepted, so the rest of that draft is filled from the coins without
asking the oracle (half the oracle calls at 0.8 acceptance, draft 8); under sampled
verification a wrong draft may still be accepted, so every draft asks.
"""

from collections.abc import Sequence

from engine.backend import Backend, SeqState
from engine.drafters.base import BaseDrafter
from engine.errors import BackendError
from engine.sim.hashing import keyed, unit
from engine.template import ChatTemplate


def ordinary_tokens(template: ChatTemplate) -> int:
    """How many ordinary (non-template) token ids the vocabulary has. Both vocabularies
    here put the chat specials right after the ordinary ids (the sim's at 32000, the byte
    tokenizer's at 256), so a wrong draft stays a valid, ordinary id on either backend."""
    return min(template.im_start, template.im_end, template.end_of_text)


class SyntheticDrafter(BaseDrafter):
    """Oracle-based drafter: asks the backend's declared oracle for the true continuation."""

    name = "synthetic"

    def __init__(self, acceptance: float, seed: int, slot: int, greedy: bool = True) -> None:
        self.acceptance = acceptance
        self.greedy = greedy
        self._key = keyed(seed, slot, 0xD4AF7)

    def propose(
        self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
    ) -> list[int]:
        """Up to `k` drafts after `tokens`."""
        oracle = backend.capabilities.oracle
        if oracle is None:
            raise BackendError(f"the synthetic drafter needs a backend with an oracle; "
                               f"{backend.name} declares none")
        vocab = ordinary_tokens(backend.template)
        base = len(tokens)
        coins = [keyed(self._key, base + i) for i in range(k)]
        if self.greedy:
            hits = next((i for i, c in enumerate(coins) if unit(c) >= self.acceptance), k)
            truths = oracle.continuation(state, tokens[-1], min(hits + 1, k))
            if hits == k:
                return truths
            # the first miss, and the rest of the draft filled from its coins
            return truths[:hits] + [(truths[hits] + 1 + c % 97) % vocab for c in coins[hits:]]
        batch = [tokens[-1]]
        for coin in coins:
            truth = oracle.peek(state, batch)[-1]
            batch.append(truth if unit(coin) < self.acceptance
                         else (truth + 1 + coin % 97) % vocab)
        return batch[1:]
