"""An internal invariant failing, as the CLI's one line: a bug report, not the internal
message. A state machine refusing a move, an event of the wrong shape, a failed assertion
(`fsm.errors.INTERNAL_ERRORS`) are none of the user's doing, and their own words (states,
triggers) mean nothing to a user: the line says what kind of failure it was, where in the
input it struck (the notes the failing code added), that it is specledger's bug, and the
file the traceback was saved to, for the report."""

import sys
import tempfile
import traceback
from pathlib import Path

from transitions import MachineError

from fsm.errors import InvalidTransitionError, PayloadError

EXIT_STATUS = 70  # sysexits.h EX_SOFTWARE: an internal software error

WHAT: tuple[tuple[type[BaseException], str], ...] = (
    (InvalidTransitionError, "the round state machine refused an event"),
    (MachineError, "the round state machine refused an event"),
    (PayloadError, "an event did not have its trigger's payload"),
    (AssertionError, "an internal check failed"),
)
"""What each internal failure is, in words a user can repeat in a report (first match)."""


def describe(exc: BaseException) -> str:
    """What kind of internal failure `exc` is."""
    return next((what for kind, what in WHAT if isinstance(exc, kind)),
                f"an unexpected {type(exc).__name__}")


def save_traceback(exc: BaseException, argv: list[str]) -> Path | None:
    """Write the command line and `exc`'s traceback to a new file in the temp folder;
    its path, or None when it could not be written."""
    text = (f"specledger {' '.join(argv)}\n\n"
            + "".join(traceback.format_exception(exc)))
    try:
        with tempfile.NamedTemporaryFile("w", prefix="specledger-bug-", suffix=".txt",
                                         delete=False) as out:
            out.write(text)
    except OSError:
        return None
    return Path(out.name)


def bug_line(command: str, exc: BaseException, argv: list[str] | None = None) -> str:
    """The one line the CLI prints for an internal failure of `command`."""
    notes = "".join(f" ({note})" for note in getattr(exc, "__notes__", ()))
    saved = save_traceback(exc, sys.argv[1:] if argv is None else argv)
    where = f"; its traceback is in {saved}" if saved is not None else ""
    return (f"specledger {command}: internal error: {describe(exc)}{notes}. This is a bug in "
            f"specledger, not in what you gave it: please report it{where}")
