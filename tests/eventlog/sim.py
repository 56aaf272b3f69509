"""Small sim sessions for the analysis tests: events in memory, or recorded in a log."""

from collections.abc import Iterable
from typing import Any

from engine.config import RunConfig
from engine.session import MemoryJournal, Session
from eventlog.fold import fold_log
from eventlog.records import TurnKey, TurnRecord
from fsm.draft_profile import DraftProfile
from fsm.event import Event

SMALL: dict[str, Any] = {"turns": 2, "prompt_tokens": 64, "question_tokens": 8,
                         "answer_tokens": 60}


def sim_config(**changes: Any) -> RunConfig:
    """A small sim configuration with `changes`."""
    return RunConfig(**{**SMALL, **changes})


def sim_events(**changes: Any) -> tuple[list[Event], dict[str, Any]]:
    """The events of a small sim session and its stored configuration."""
    config = sim_config(**changes)
    journal = MemoryJournal()
    Session(config, journal).run()
    return journal.events, config.to_dict()


def turn_profiles(events: Iterable[Event]) -> dict[TurnKey, DraftProfile]:
    """Each (slot, turn)'s draft profile, folded from `events`."""
    closed: list[TurnRecord] = []
    fold = fold_log(events, closed.append)
    return {(r.slot, r.turn): r.profile for r in [*closed, *fold.records.values()]}
