"""The shape of a line no reader knows: its numbers, quoted text and paths made alike, so
the unknown lines of a log group into the few formats the reader lacks (`import` prints
the most common ones)."""

import re

_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?")
_PATH = re.compile(r"(?:/[\w.@+-]+){2,}")
_WIDTH = 80


def line_shape(text: str) -> str:
    """`text` with quoted strings as `'…'`, paths as `/…`, numbers as `N`, runs of spaces
    as one, cut to 80 characters."""
    s = _QUOTED.sub("'…'", text.strip())
    s = _PATH.sub("/…", s)
    s = _NUMBER.sub("N", s)
    s = " ".join(s.split())
    return s if len(s) <= _WIDTH else s[:_WIDTH - 1] + "…"
