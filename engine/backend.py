"""The interface every backend implements: sequence state and the operations that the
round transaction and the rollback strategies are built from."""

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from engine.template import ChatTemplate
from fsm.invariants import Audit


class VerifyMode(StrEnum):
    """What a verify forward keeps, by rollback strategy."""

    LIVE = "live"            # advance the live state through the whole batch
    PER_TOKEN = "per_token"  # advance it and keep the state after every position
    DEFERRED = "deferred"    # leave it untouched and record the recurrent inputs


@dataclass
class VerifyOut:
    """Target tokens after each batch position, and what the mode kept (opaque to the
    engine: intermediate states or recorded inputs)."""

    targets: list[int]
    kept: Any = None


class SeqState(Protocol):
    """A backend's per-sequence state (attention KV + recurrent + conv)."""

    @property
    def position(self) -> int:
        """How many tokens the state has consumed."""


class Backend(Protocol):
    """Operations on sequence state. Each advances `now()` by what it costs."""

    name: str
    template: ChatTemplate
    clock: str  # "simulated" or "wall"

    def now(self) -> float:
        """Seconds since the backend was built, on its clock."""

    def question(self, slot: int, turn: int, first: bool) -> list[int]:
        """The user's message for a turn (deterministic from the run's seed); the first
        turn's is the long one."""

    def new_state(self) -> SeqState:
        """An empty state (position 0)."""

    def reset(self, state: SeqState) -> None:
        """Forget everything (position 0)."""

    def prefill(self, state: SeqState, tokens: Sequence[int]) -> int:
        """Consume `tokens`; return the target's next token."""

    def verify(self, state: SeqState, batch: Sequence[int], mode: VerifyMode) -> VerifyOut:
        """One forward over `batch` from the state's position."""

    def forward(self, state: SeqState, tokens: Sequence[int]) -> list[int]:
        """Consume `tokens` (a replay forward); return the target token after each."""

    def snapshot(self, state: SeqState) -> Any:
        """A restorable copy of the recurrent + conv state and the KV length."""

    def restore(self, state: SeqState, snap: Any) -> None:
        """Bring `state` back to `snap`."""

    def select(self, state: SeqState, kept: Any, index: int) -> None:
        """`per_token` commit: the state after batch position `index` becomes live."""

    def replay_inputs(self, state: SeqState, kept: Any, n: int) -> None:
        """`input_replay` commit: run only the recurrence over the first `n` recorded
        positions from the live state."""

    def trim(self, state: SeqState, position: int) -> None:
        """Cut the attention KV to `position` tokens; the recurrent state is left as it
        is (it cannot be trimmed: that is the point)."""

    def kv_length(self, state: SeqState) -> int:
        """Tokens held by the attention KV cache."""

    def digest(self, state: SeqState) -> str:
        """Digest of the recurrent + conv state."""

    def audit(self, state: SeqState, tokens: Sequence[int]) -> Audit:
        """Compare `state` with the state that processing the consumed prefix of the
        slot's committed `tokens` (the first `state.position`) one by one produces.
        Called after every commit with the slot's own list, which within a turn only
        grows: backends keep their twin incremental."""

    def state_bytes(self) -> int:
        """Bytes of one recurrent + conv state (what a checkpoint copies)."""

    def peek(self, state: SeqState, tokens: Sequence[int]) -> list[int]:
        """The target tokens after each of `tokens` from `state`, without changing it and
        without cost: the oracle behind the synthetic drafter."""

    def continuation(self, state: SeqState, last: int, n: int) -> list[int]:
        """The target's own next `n` tokens after `last` from `state` (greedy, as `peek`
        would give them one at a time), without changing the state."""
