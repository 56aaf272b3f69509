"""A physical line as every engine's reader reads it: without the ANSI colours a terminal
logger adds and the carriage return a Windows or docker capture leaves."""

import re

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def clean(raw: str) -> str:
    """A physical line without its ANSI colours and carriage return."""
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    return raw[:-1] if raw.endswith("\r") else raw
