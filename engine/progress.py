"""What a session reports while it runs, for a progress display."""

from typing import Protocol


class Progress(Protocol):
    """Told of every committed token and every finished turn (of any slot)."""

    def tokens(self, n: int) -> None:
        """`n` more tokens were committed in the current turn."""

    def turn_done(self) -> None:
        """A turn ended (at EOG or at the answer cap)."""
