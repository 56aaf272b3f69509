"""Errors of the vLLM integration; each message is one line that says what to do."""

from engine.errors import BackendError


class VllmError(BackendError):
    """Base of every error the vLLM integration raises on purpose."""


class VllmNotInstalledError(VllmError):
    """vLLM's environment is not where the cache says, or it cannot import vLLM."""
