"""A slot: one conversation's committed tokens, model state and context checkpoints, and
the plan for reusing them when the next request arrives."""

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.backend import Backend, SeqState, Snapshot
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
class Slot:
    """Everything one conversation owns: its state, the machine its events go through,
    its drafter and progress guard (each holds the slot's own history), `tokens`
    committed, `transcript` what the user saw (prompt + visible answer through EOG), and
    its context checkpoints. The backend and configuration every slot shares are passed
    where they are used (`engine.services.Services`)."""

    id: int
    state: SeqState
    machine: RoundMachine
    drafter: Drafter | None
    guard: ProgressGuard
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

    def view(self, backend: Backend) -> dict[str, Any]:
        """The live slot state, in the projection's terms."""
        return {
            "slot": self.id,
            "tokens": list(self.tokens),
            "position": self.state.position,
            "state": self.machine.state.value,
            "digest": backend.digest(self.state),
        }
