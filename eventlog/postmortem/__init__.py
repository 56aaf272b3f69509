"""Postmortem: find, from the log alone, the failure patterns that made real engines slow
or wrong, each with where it shows, its numbers, an explanation and the fix."""

from eventlog.postmortem.analyze import (
    BadReferenceError,
    Postmortem,
    analyze,
    detectors,
    postmortem_session,
)
from eventlog.postmortem.finding import Finding, Kind, Severity

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
