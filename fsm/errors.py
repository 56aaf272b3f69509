"""Exception types. Every error a user can cause derives from `SpecledgerError`, so the
CLI can print one line for it instead of a traceback. Those in `INTERNAL_ERRORS` no user
causes: a state machine refusing a move, an event of the wrong shape, a failed assertion
are specledger's bugs, and the CLI prints them as a bug report (specledger/cli/bug_report.py),
never their own text, whose states and triggers mean nothing to a user. Code that knows
where in its input such an error struck says so with `exc.add_note("line N of LOG")`:
the report prints the notes."""

from transitions import MachineError


class SpecledgerError(Exception):
    """Base of every error specledger raises on purpose; the message is user-facing."""


class InvalidTransitionError(SpecledgerError):
    """A trigger was fired in a state that has no such transition."""


class EmptyDraftError(InvalidTransitionError):
    """`verify` was fired with no draft tokens: a plain step must use `decode`."""


class EmptyCommitError(InvalidTransitionError):
    """`commit` was fired with zero tokens: every round must commit at least one."""


class ReplayWithoutRestoreError(InvalidTransitionError):
    """`replay` was fired without a preceding `restore` in the same round."""


class PayloadError(SpecledgerError):
    """An event's payload is not its trigger's payload type (fsm/payloads.py)."""


class InvariantViolationError(SpecledgerError):
    """An invariant failed under `--strict`; without it the violation is only recorded."""


INTERNAL_ERRORS: tuple[type[BaseException], ...] = (
    InvalidTransitionError, PayloadError, MachineError, AssertionError)
"""The exceptions that are an internal invariant failing (a bug), never a user's error."""
