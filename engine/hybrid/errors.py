"""Errors of the hybrid model backend; each message says what to fix."""

from fsm.errors import SpecledgerError


class HybridError(SpecledgerError):
    """Base of every error the hybrid model raises on purpose."""


class HybridConfigError(HybridError):
    """config.json is missing a field, has an unsupported value, or is inconsistent."""


class CheckpointNotFoundError(HybridError):
    """The checkpoint directory, its config.json or its *.safetensors files are missing."""


class CheckpointFormatError(HybridError):
    """The safetensors files do not hold exactly the tensors the config asks for."""


class StateError(HybridError):
    """A state operation was applied to a state it does not belong to (wrong position,
    wrong model, or KV entries overwritten since a snapshot)."""
