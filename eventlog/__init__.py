"""eventlog package."""
