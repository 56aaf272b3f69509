"""Postmortem: find, from the log alone, the failure patterns that made real engines slow
or wrong, each with where it shows, its numbers, an explanation and the fix.

Its names load on first use, so that a caller naming only a severity (the CLI's parser)
does not import the detectors.
"""

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eventlog.postmortem.analyze import (
        BadReferenceError,
        Postmortem,
        analyze,
        detectors,
        postmortem_session,
    )
    from eventlog.postmortem.finding import Finding, Kind, Severity

_HOMES = {
    "BadReferenceError": "eventlog.postmortem.analyze",
    "Postmortem": "eventlog.postmortem.analyze",
    "analyze": "eventlog.postmortem.analyze",
    "detectors": "eventlog.postmortem.analyze",
    "postmortem_session": "eventlog.postmortem.analyze",
    "Finding": "eventlog.postmortem.finding",
    "Kind": "eventlog.postmortem.finding",
    "Severity": "eventlog.postmortem.finding",
}
"""Each name's module, imported when the name is first used."""

__all__ = [
    "BadReferenceError",
    "Finding",
    "Kind",
    "Postmortem",
    "Severity",
    "analyze",
    "detectors",
    "postmortem_session",
]


def __getattr__(name: str) -> Any:
    """A name of the package, from its module on first use."""
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(ModuleType):
    """The package: its exported names win over its submodules' (`analyze` is a module and
    the function the package exports), so importing that submodule does not rebind it."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _HOMES and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
