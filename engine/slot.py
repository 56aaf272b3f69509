"""A slot: one conversation's committed tokens, model state and context checkpoints, the
plan for reusing them when the next request arrives, and what works on the slot."""

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.backend import SeqState, Snapshot
from engine.drafters import Drafter
from engine.speculative import common_prefix
from fsm.invariants import ProgressGuard
from fsm.machine import RoundMachine


@dataclass(frozen=True)
class CtxCheckpoint:
    """A saved state at `position` (a prompt position, never beyond the committed length)."""

    position: int
    snap: Snapshot


@dataclass(frozen=True)
class ReusePlan:
    """How a new prompt reuses the slot.

    `kept`: common prefix of slot and prompt. `start`: the position prefill resumes from.
    `restore`: the context checkpoint to restore, if the live state ran past `kept`;
    `reset` when none is usable. `reprefill`: history tokens processed a second time.
    """

    kept: int
    start: int
    restore: CtxCheckpoint | None
    reset: bool
    reprefill: int


def plan_reuse(
    tokens: Sequence[int], position: int, ring: Sequence[CtxCheckpoint], prompt: Sequence[int]
) -> ReusePlan:
    """Attention state trims to any prefix; recurrent state only moves back to a saved
    checkpoint. So the live state is reusable only if it has consumed nothing beyond the
    common prefix; else the newest checkpoint at or before it, else nothing."""
    kept = common_prefix(tokens, prompt)
    usable = min(kept, len(prompt) - 1)  # at least one prompt token must run for logits
    if position <= usable:
        return ReusePlan(kept, position, None, False, 0)
    lost_upto = min(kept, position)
    for ckpt in reversed(ring):
        if ckpt.position <= usable:
            return ReusePlan(kept, ckpt.position, ckpt, False, lost_upto - ckpt.position)
    return ReusePlan(kept, 0, None, True, lost_upto)


@dataclass
class SlotWork:
    """What works on one slot, each keeping that slot's own history: the machine its
    events go through (with the turn and round numbers), its drafter, its progress
    guard."""

    machine: RoundMachine
    drafter: Drafter | None
    guard: ProgressGuard


@dataclass
class Slot:
    """One conversation's data: its model state, `tokens` committed, `transcript` what
    the user saw (prompt + visible answer through EOG), and its context checkpoints. What
    works on it is passed where it is used (`engine.services.Services`)."""

    id: int
    state: SeqState
    tokens: list[int] = field(default_factory=list)
    transcript: list[int] = field(default_factory=list)
    ring: deque[CtxCheckpoint] = field(default_factory=deque)

    def save_ctx(self, snap: Snapshot, limit: int) -> None:
        """Add a context checkpoint at the current position, keeping the newest `limit`."""
        self.ring.append(CtxCheckpoint(self.state.position, snap))
        while len(self.ring) > limit:
            self.ring.popleft()

    def drop_ctx_beyond(self, position: int) -> None:
        """Forget checkpoints that belong to a history no longer in the slot."""
        self.ring = deque(c for c in self.ring if c.position <= position)
