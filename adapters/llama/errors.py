"""Errors of the llama.cpp integration; each message is one line that says what to do."""

from engine.errors import BackendError


class LlamaError(BackendError):
    """Base of every error the llama.cpp integration raises on purpose."""


class LlamaNotBuiltError(LlamaError):
    """`llama-server` or the vendored GGUF converter is not where the cache says."""


class GgufExportError(LlamaError):
    """A checkpoint could not be converted to GGUF."""


class PortInUseError(LlamaError):
    """llama-server could not bind its loopback port."""


class ModelRefusedError(LlamaError):
    """llama-server exited while loading: it refused the model or a flag."""


class ServerTimeoutError(LlamaError):
    """llama-server did not report healthy in time."""


class ServerDiedError(LlamaError):
    """llama-server exited (or stopped answering) after it was ready."""


class ServerRequestError(LlamaError):
    """llama-server answered a request with an HTTP error."""


class UnknownBuildError(LlamaError):
    """A llama.cpp build named by something that is not a llama-cpp-python version."""
