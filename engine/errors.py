"""Engine errors: bad configuration and backend failures, with actionable messages."""

from fsm.errors import SpecledgerError


class ConfigError(SpecledgerError):
    """A run configuration value is out of range or unknown."""


class BackendError(SpecledgerError):
    """A backend could not be built or failed while running."""
