"""`draft-model`: a smaller hybrid model with its own state and its own checkpoints.

A recurrent draft model has the target's problem: after a partial accept its state holds
rejected drafts. It keeps a checkpoint per round (taken before drafting) and a ring of
checkpoints at request boundaries, kept across the requests of a slot (llama.cpp PR
22521: discarding them at every new request made large agentic sessions recompute the
draft state over the whole history). `keep_checkpoints=False` reproduces that bug.
`compiled` drafts through the compiled one-token step (`run --compile`).
"""

from collections import deque
from collections.abc import Sequence

import torch

from engine.backend import UBATCH, Backend, SeqState
from engine.drafters.base import BaseDrafter
from engine.hybrid.compiled import decode_step
from engine.hybrid.model import HybridModel
from engine.hybrid.state import StateSnapshot
from engine.speculative import common_prefix


class DraftModelDrafter(BaseDrafter):
    """Greedy drafts from a small model whose state follows the slot's committed tokens.

    `replayed` counts accepted drafts re-processed after restoring the round's checkpoint;
    `recomputed` counts history tokens processed again because the state had to go back
    further, to a request checkpoint or to nothing; `position` is where its state is.
    """

    name = "draft-model"

    def __init__(self, model: HybridModel, keep_checkpoints: bool = True, ring: int = 4,
                 compiled: bool = False) -> None:
        self.model = model
        self.keep_checkpoints = keep_checkpoints
        self.compiled = compiled
        self.state = model.new_state()
        self.seen: list[int] = []  # tokens the state has consumed
        self.ring: deque[tuple[int, StateSnapshot]] = deque(maxlen=ring)
        self.recomputed = 0
        self.replayed = 0
        self._lost: list[int] = []
        self._round: tuple[int, StateSnapshot] | None = None

    @property
    def position(self) -> int:
        """Tokens the draft state has consumed."""
        return self.state.position

    def _forward(self, tokens: Sequence[int]) -> torch.Tensor:
        logits = None
        for i in range(0, len(tokens), UBATCH):
            ids = torch.tensor([list(tokens[i:i + UBATCH])], dtype=torch.long,
                               device=self.model.embed_tokens.weight.device)
            if self.compiled and ids.shape[1] == 1:  # a draft step
                logits, _ = decode_step(self.model, ids, self.state)
            else:
                logits = self.model.forward(ids, self.state, last_only=True)
        assert logits is not None
        return logits[0, -1]

    def sync(self, prefix: Sequence[int]) -> None:
        """Make the draft state consume exactly `prefix`, reusing what it can."""
        if self._lost:  # the history thrown away at the request boundary comes back now
            self.recomputed += common_prefix(self._lost, prefix)
            self._lost = []
        keep = common_prefix(self.seen, prefix)
        if self.position > keep:
            if self._round is not None and self._round[0] <= keep:
                pos, snap = self._round  # the usual partial accept: back to this round's start
                self.state.restore(snap)
                self.replayed += keep - pos
            else:
                usable = [c for c in self.ring if c[0] <= keep]
                if usable:
                    pos, snap = max(usable, key=lambda c: c[0])
                    self.state.restore(snap)
                else:
                    pos = 0
                    self.state.reset()
                self.recomputed += keep - pos
            del self.seen[pos:]
        new = prefix[self.position:]
        if new:
            self._forward(new)
            self.seen.extend(new)
            if len(new) > 1 and self.keep_checkpoints:  # a request's prompt: keep a checkpoint
                self.ring.append((self.position, self.state.snapshot()))

    def new_request(self) -> None:
        """A new completion request arrived for this slot."""
        if not self.keep_checkpoints:
            self.ring.clear()
            self._round = None
            self.state.reset()
            self._lost, self.seen = self.seen, []

    def propose(self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
                ) -> list[int]:
        """Up to `k` greedy drafts after `tokens`."""
        self.sync(tokens[:-1])
        self._round = (self.position, self.state.snapshot())
        out: list[int] = []
        x = tokens[-1]
        for _ in range(k):
            x = int(self._forward([x]).argmax())
            out.append(x)
        self.seen.extend([tokens[-1], *out[:-1]])
        return out

    def stats(self) -> dict[str, int]:
        """The draft state's position and its replay and recompute totals so far."""
        return {"draft_position": self.position, "draft_recomputed": self.recomputed,
                "draft_replayed": self.replayed}
