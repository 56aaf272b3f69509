"""Helpers for driving a sim session by hand."""

from engine.config import RunConfig
from engine.session import Journal, MemoryJournal, Session
from engine.slot import Slot
from engine.turn import start_turn


def open_slot(config: RunConfig, journal: Journal | None = None
              ) -> tuple[Session, Slot, Journal]:
    """A session whose only slot has started its first turn (prefilled)."""
    journal = journal if journal is not None else MemoryJournal()
    session = Session(config, journal)
    slot = session.slots[0]
    start_turn(session.services, slot, session.conversation.question(0, 1))
    return session, slot, journal
