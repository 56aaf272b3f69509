"""Errors of the vLLM integration; each message is one line that says what to do."""

from engine.errors import BackendError


class VllmError(BackendError):
    """Base of every error the vLLM integration raises on purpose."""


class VllmNotInstalledError(VllmError):
    """vLLM's environment is not where the cache says, or it cannot import vLLM."""


class ModelRefusedError(VllmError):
    """vLLM's server exited while starting: it refused the model or an option."""


class MethodUnsupportedError(VllmError):
    """A speculative method vLLM's CPU build cannot run (or that has no vLLM name)."""


class ServerTimeoutError(VllmError):
    """vLLM's server did not report healthy in time."""


class ServerDiedError(VllmError):
    """vLLM's server exited (or stopped answering) after it was ready."""


class ServerRequestError(VllmError):
    """vLLM's server answered a request with an HTTP error."""


class MetricsFormatError(VllmError):
    """vLLM's /metrics page is not the Prometheus text it should be."""
