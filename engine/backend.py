"""The contract between the engine and a model: per-sequence state and the operations that
the round transaction and the rollback strategies are built from, plus the capabilities a
backend declares beyond them (callers check these fields; nothing is probed)."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from engine.template import ChatTemplate
from fsm.invariants import Audit

UBATCH = 512
"""Tokens per forward of a prompt or a replay (llama.cpp's default n_ubatch): longer
sequences run in chunks of it."""


class Keep(Enum):
    """What a verify forward keeps beside advancing the state: the one thing a rollback
    strategy asks of the model (each strategy declares its own, engine/strategies/)."""

    NOTHING = "nothing"  # the state simply advances (checkpoint, none)
    PER_TOKEN = "per_token"  # the recurrent state after every batch position (select)
    INPUTS = "inputs"  # the state stays; the recurrent inputs are recorded (replay)


@dataclass
class VerifyOut:
    """Target tokens after each batch position, and what the strategy needs kept (opaque
    to the engine: intermediate states or recorded inputs)."""

    targets: list[int]
    kept: Any = None


class Snapshot(Protocol):
    """A backend's restorable copy of one state (`Backend.snapshot`), opaque to the
    engine."""


class SeqState(Protocol):
    """A backend's per-sequence state (attention KV + recurrent + conv)."""

    @property
    def position(self) -> int:
        """How many tokens the state has consumed."""


class Oracle(Protocol):
    """The target's answers without cost or side effects: what the synthetic drafter
    drafts from."""

    def peek(self, state: SeqState, tokens: Sequence[int]) -> list[int]:
        """The target tokens after each of `tokens` from `state`, state unchanged."""

    def continuation(self, state: SeqState, last: int, n: int) -> list[int]:
        """The target's own next `n` tokens after `last` from `state` (greedy, as `peek`
        would give them one at a time), state unchanged."""


class BatchVerify(Protocol):
    """One target forward over several sequences at once (a scheduler step's slots): row
    `i` is `batches[i]` from `states[i]`'s own position, rows of different lengths. Each
    row's result, and what it leaves in its state, is what `verify(states[i], batches[i],
    keeps[i])` alone gives (up to the numerics of the batch shape)."""

    def __call__(self, states: Sequence["SeqState"], batches: Sequence[Sequence[int]],
                 keeps: Sequence[Keep]) -> list["VerifyOut"]:
        """The rows' results, in order."""


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers beyond the state operations; None where it has none.
    `resolved`: configuration fields as they actually ran (kernels, device), recorded
    with the session instead of what was asked for ("auto")."""

    oracle: Oracle | None = None
    # (state, start, end): the target's final hidden states at positions start..end-1
    # (end <= position), which the MTP head drafts from.
    hidden_states: Callable[[SeqState, int, int], Any] | None = None
    model_digest: Callable[[], str] | None = None
    # One forward for every slot of a scheduler step (`--schedule batched`).
    verify_batch: BatchVerify | None = None
    resolved: Mapping[str, str] = field(default_factory=dict)
    # Blocking tensor copies one checkpoint save or restore takes (llama.cpp's host path
    # copies a state tensor by tensor); 0: none counted.
    checkpoint_tensors: int = 0


class Backend(Protocol):
    """Operations on sequence state. Each advances `now()` by what it costs."""

    name: str
    template: ChatTemplate
    clock: str  # "simulated" or "wall"
    capabilities: Capabilities

    def now(self) -> float:
        """Seconds since the backend was built, on its clock."""

    def new_state(self) -> SeqState:
        """An empty state (position 0)."""

    def reset(self, state: SeqState) -> None:
        """Forget everything (position 0)."""

    def prefill(self, state: SeqState, tokens: Sequence[int]) -> int:
        """Consume `tokens`; return the target's next token."""

    def verify(self, state: SeqState, batch: Sequence[int], keep: Keep) -> VerifyOut:
        """One forward over `batch` from the state's position, keeping what `keep` says
        (`VerifyOut.kept`), which the round's strategy settles with."""

    def forward(self, state: SeqState, tokens: Sequence[int]) -> list[int]:
        """Consume `tokens` (a replay forward); return the target token after each."""

    def snapshot(self, state: SeqState) -> Snapshot:
        """A restorable copy of the recurrent + conv state and the KV length."""

    def restore(self, state: SeqState, snap: Snapshot) -> None:
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
