"""Exception types. Every error a user can cause derives from `SpecledgerError`, so the
CLI can print one line for it instead of a traceback."""


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
