"""`mtp`: drafts from the target's multi-token-prediction head (Qwen3.5 `mtp.*`).

The head predicts token i + 2 from the target's hidden state at i and token i + 1. Its
one attention layer caches those pairs; the pairs of committed positions use the target's
real hidden states, while chained drafts beyond the first use the head's own output in
their place, so after every round the cache is cut back to the committed pairs.
"""

from collections.abc import Sequence

import torch

from engine.backend import Backend, SeqState
from engine.drafters.base import BaseDrafter
from engine.errors import BackendError
from engine.hybrid.compiled import mtp_step
from engine.hybrid.mtp import MtpHead
from engine.speculative import common_prefix


class MtpDrafter(BaseDrafter):
    """Greedy chained drafts from an `MtpHead` bound to the target; `compiled`: its
    one-pair steps through the compiled step (`run --compile`)."""

    name = "mtp"

    def __init__(self, head: MtpHead, compiled: bool = False) -> None:
        self.head = head
        self.compiled = compiled
        self.cache = head.new_state()
        self.seen: list[int] = []  # tokens whose pairs are cached: pair i uses seen[i + 1]

    def propose(self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
                ) -> list[int]:
        """Up to `k` drafts after `tokens` (the target's state is at len(tokens) - 1)."""
        hidden_states = backend.capabilities.hidden_states
        if hidden_states is None:
            raise BackendError("the mtp drafter needs a backend with hidden states (torch)")
        p = state.position
        # Pairs i < p are committed: (hidden[i], tokens[i + 1]). Keep the cached ones that
        # still match the slot, drop the rest (rejected drafts, chained guesses).
        keep = min(common_prefix(self.seen, tokens[:p + 1]) - 1, self.cache.position)
        keep = max(keep, 0)
        if self.cache.position > keep:
            self.cache.trim(keep)
        hidden = hidden_states(state, keep, p)  # (p - keep, H)
        device = hidden.device
        ids = torch.tensor([list(tokens[keep + 1:p + 1])], dtype=torch.long, device=device)
        logits, own = self._step(hidden[None], ids)
        self.seen = list(tokens[:p + 1])
        drafts = [int(logits[0, -1].argmax())]
        h = own[:, -1:]
        while len(drafts) < k:
            logits, own = self._step(h, torch.tensor([[drafts[-1]]], device=device))
            drafts.append(int(logits[0, -1].argmax()))
            h = own[:, -1:]
        return drafts

    def _step(self, hidden: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The head's step over pairs (hidden (1, T, H), ids (1, T)) in the drafter's cache."""
        if self.compiled and ids.shape[1] == 1:
            return mtp_step(self.head, hidden, ids, self.cache)
        return self.head.step(hidden, ids, self.cache)
