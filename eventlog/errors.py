"""Errors of the event log. Each message is one actionable line the CLI prints as is."""

from fsm.errors import SpecledgerError


class DatabaseUnavailableError(SpecledgerError):
    """The database cannot be reached: no file there, an unwritable path, a bad or
    unknown URL, a missing driver, or a server that refuses the connection."""


class DatabaseUrlError(DatabaseUnavailableError):
    """`--db` is a URL that does not parse, or whose port or options are not valid."""


class NotASpecledgerDatabaseError(SpecledgerError):
    """The database exists but is not a specledger database, or has another schema version."""


class UnknownSessionError(SpecledgerError):
    """No session with that id in this database."""


class EmptyLedgerError(UnknownSessionError):
    """The database has no tables yet: a ledger being created (its first writer makes the
    schema in one transaction), or one nothing was ever recorded into. It has no sessions."""


class RecordingFailedError(SpecledgerError):
    """Writing a session to the ledger failed (a full disk, a lost server); the message
    says whether the session could still be marked `failed`."""


class StaleWriterError(SpecledgerError):
    """An append collided with a sequence number already stored for the session: another
    writer owns it, so this one's sequence is stale (an expected-version append failure)."""
