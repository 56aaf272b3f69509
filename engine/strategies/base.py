"""What a rollback strategy is (docs/design.md#rollback-strategies), and the `Round` it
settles."""

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from engine.backend import Backend, Keep, SeqState, Snapshot, VerifyOut
from engine.config import RunConfig
from engine.slot import Slot, SlotWork
from engine.speculative import Block
from fsm.states import Trigger


@dataclass
class Round:
    """One round of a slot between its verify request and its commit. `batch`: the last
    committed token, then the drafts (none: a plain decode); `position`: the state's when
    the round began; `saved`: the strategy's checkpoint; `out`: the latest verify's
    answer; `trigger`: what records the next verify (VERIFY, RETRY, DECODE);
    `draft_facts`: invariant 6's (draft state position, where it belongs)."""

    slot: Slot
    work: SlotWork
    backend: Backend
    config: RunConfig
    strategy: "RollbackStrategy"
    batch: list[int]
    trigger: Trigger
    position: int
    saved: Snapshot | None = None
    draft_facts: tuple[int | None, int | None] = (None, None)
    out: VerifyOut | None = None

    @property
    def drafts(self) -> list[int]:
        """The drafted tokens the round verifies."""
        return self.batch[1:]

    @property
    def keep(self) -> Keep:
        """What the verify forward keeps: the strategy's, for a speculative round."""
        return self.strategy.keep if self.drafts else Keep.NOTHING

    @property
    def state(self) -> SeqState:
        """The slot's live state."""
        return self.slot.state

    @property
    def verified(self) -> VerifyOut:
        """The latest verify's answer (a round settles only after one)."""
        if self.out is None:
            raise RuntimeError("a round settles only after its verify was answered")
        return self.out


class RollbackStrategy(ABC):
    """How rejected drafts leave the recurrent state: its `name` (BEGIN's `strategy`),
    what the verify forward keeps, and how the round settles. It holds no per-round data
    (the `Round` does), so one object serves every slot."""

    name: ClassVar[str]
    keep: ClassVar[Keep]

    def save(self, backend: Backend, state: SeqState) -> Snapshot | None:
        """What a rejection restores, taken before drafting; None by default."""
        return None

    def accept(self, r: Round) -> None:
        """Every draft was accepted: bring the state to the end of the batch (by default
        the verify forward already did)."""
        return None

    @abstractmethod
    def roll_back(self, r: Round, block: Block) -> bool:
        """Bring the state to the accepted boundary (`block.consumed` batch positions past
        `r.position`), recording each step as an event; False when the round must
        verify again."""
