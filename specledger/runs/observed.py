"""A run of an engine we observe (adapters/protocol.py), recorded: start its server, drive
the conversation, stop it, read what it reported, fire the events into memory, then create
the session with its whole configuration (which needs the events' counts) and write the
events unit by unit, so each database transaction still holds whole rounds.

A conversation the server ended early (it died, or refused a request) is recorded with
the turns before it and a `fail` event, the session `failed`; then the run's error is
raised, naming the session, so the command line says it in one line and exits non-zero
with nothing lost.
"""

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from adapters.protocol import ObservedEngine, Recording
from engine.config import RunConfig
from engine.errors import BackendError, ConfigError
from engine.progress import Progress
from eventlog import Recorder, SessionStatus, open_db
from fsm.event import Event
from specledger.api import new_session, session_turns


def questions(config: RunConfig) -> list[str]:
    """The user messages a torch session of `config` asks in slot 0, as text: what an
    observed engine is asked, so its session compares with ours turn by turn."""
    from engine.conversation import HeldOutConversation

    conversation = HeldOutConversation(config)
    return [bytes(conversation.question(0, turn)).decode("utf-8", errors="replace")
            for turn in range(1, config.turns + 1)]


class RunStoppedError(BackendError):
    """The observed engine ended the conversation early; what it did answer is recorded."""


class OpenAIClientMissingError(ConfigError):
    """The `openai` client (the `llama` extra, which every observed backend's runs use) is
    not installed."""


def require_openai(backend: str) -> None:
    """The `openai` client, or OpenAIClientMissingError naming the `backend` that needs it."""
    try:
        import openai  # noqa: F401
    except ImportError:
        raise OpenAIClientMissingError(f"the {backend} backend needs the openai client: pip "
                                       "install 'specledger[llama]'") from None


@dataclass
class UnitJournal:
    """Events and where each unit of them ends."""

    events: list[Event] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)

    def append(self, event: Event) -> None:
        """Keep one event."""
        self.events.append(event)

    def end_unit(self) -> None:
        """Everything so far forms whole units."""
        if not self.ends or self.ends[-1] != len(self.events):
            self.ends.append(len(self.events))


def store_journal(db: str, journal: UnitJournal, rec: Recording,
                  parent_id: int | None = None) -> int:
    """Create the session of `rec` in the log at `db` and write `journal`'s events, unit by
    unit; the session ends `failed` when the recording says the run stopped early.
    Returns the session's id."""
    engine = open_db(db, create=True)
    sid = new_session(engine, rec.config, rec.backend, rec.seed, rec.model_digest, parent_id)
    write_journal(engine, sid, journal, failed=rec.error is not None)
    return sid


def write_journal(engine: Engine, sid: int, journal: UnitJournal, *, failed: bool) -> None:
    """Write `journal`'s events into the created session `sid`, unit by unit, and close
    it (`failed`, or `finished`)."""
    with Recorder(engine, sid) as recorder:
        for start, end in itertools.pairwise([0, *journal.ends]):
            for ev in journal.events[start:end]:
                recorder.append(ev)
            recorder.end_unit()
        recorder.close(SessionStatus.FAILED if failed else SessionStatus.FINISHED)


@dataclass(frozen=True)
class Observed:
    """A recorded run: its session id and what the adapter recorded."""

    session_id: int
    recording: Recording


def observe(engine: ObservedEngine[Any, Any, Any], questions: Sequence[str], db: str,
            progress: Progress | None = None, parent_id: int | None = None) -> Observed:
    """Run `engine` on `questions` and record the session into the log at `db` (as a
    re-run of session `parent_id` when one is given). Raises RunStoppedError, after
    recording, when the engine ended the conversation early."""
    def answered(tokens: int) -> None:
        if progress is not None:
            progress.tokens(tokens)
            progress.turn_done()

    with engine.server() as server:
        driven = engine.drive(server, questions, answered)
    report = engine.read(server, driven)
    journal = UnitJournal()
    rec = engine.record(report, journal)
    sid = store_journal(db, journal, rec, parent_id)
    if rec.error is not None:
        raise RunStoppedError(f"{rec.error}; session {sid} keeps the {len(rec.turns)} "
                              "turn(s) answered before it, marked failed")
    return Observed(sid, rec)


def cmd_run_observed(engine: ObservedEngine[Any, Any, Any], config: RunConfig, db: str,
                     as_json: bool, title: Callable[[dict[str, Any]], str]) -> int:
    """`specledger run` on an observed engine: run, record, print the turns (`title`: the
    table's, after the session id, from the session's stored configuration)."""
    from specledger.views import output

    label = f"{engine.backend} {config.drafter}"
    with output.progress_bar(config, label, not as_json) as progress:
        done = observe(engine, questions(config), db, progress)
    rec = done.recording
    profiles = session_turns(open_db(db, create=False), done.session_id).profiles
    if as_json:
        output.emit_json({"session": done.session_id, "events": rec.events,
                          "violations": rec.violations,
                          **{k: str(v) for k, v in rec.files.items()},
                          "turns": output.turn_rows(rec.turns, profiles)})
        return 0
    log, answers = rec.files.values()
    output.console.print(output.turn_table(
        rec.turns, f"session {done.session_id}: {title(rec.config)}", profiles))
    output.console.print(f"{rec.events} events recorded in {db}; {rec.violations} "
                         f"violation(s); server log {log}, answers {answers}")
    return 0
