"""CLI error types."""

from engine.errors import ConfigError


class UsageError(ConfigError):
    """The command line is malformed: the CLI exits 2 with one line, as argparse does."""


# What `pip install 'specledger[engine]'` adds (pyproject.toml): a command that imports one
# of these without it gets one line naming the extra.
ENGINE_MODULES = frozenset({"torch", "safetensors", "tokenizers", "matplotlib"})


class ExtraMissingError(ConfigError):
    """A command needs an optional part of specledger that is not installed."""

    def __init__(self, command: str, module: str) -> None:
        super().__init__(f"'{command}' needs the engine ({module} is not installed): "
                         f"pip install 'specledger[engine]'")
