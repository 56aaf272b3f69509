"""How every engine's log reader counts a line: each physical line once, as parsed (it
became a record, an interval, a fact or a failure), skipped (the engine's, or known noise,
carrying nothing the session uses) or unknown (no shape the reader knows: a format it
should learn, whose shape `import` prints); a line that starts another server process is
not read by the run it came to (`NEW_RUN`)."""

from enum import StrEnum


class LineKind(StrEnum):
    """How one line was counted."""

    PARSED = "parsed"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"
    NEW_RUN = "new_run"  # not read: it starts another server process
