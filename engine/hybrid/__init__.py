"""A Qwen3.5-style hybrid (Gated DeltaNet + gated attention) language model in plain torch,
with per-sequence state that supports every rollback strategy."""

from engine.hybrid.config import HybridConfig
from engine.hybrid.errors import (
    CheckpointFormatError,
    CheckpointNotFoundError,
    HybridConfigError,
    HybridError,
    StateError,
)
from engine.hybrid.loader import LoadedCheckpoint, load_checkpoint
from engine.hybrid.model import HybridModel
from engine.hybrid.state import HybridState, RecordedInputs, StateSnapshot, TokenStates

__all__ = [
    "CheckpointFormatError",
    "CheckpointNotFoundError",
    "HybridConfig",
    "HybridConfigError",
    "HybridError",
    "HybridModel",
    "HybridState",
    "LoadedCheckpoint",
    "RecordedInputs",
    "StateError",
    "StateSnapshot",
    "TokenStates",
    "load_checkpoint",
]
