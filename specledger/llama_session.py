"""Store a llama-server log (with the client's answers, when there are some) as a session:
the ledger runs first into memory, so the session is created with its whole provenance
(which needs the fold's counts), then the events go to the recorder unit by unit, so
each database transaction still holds whole rounds. A log that ends inside a request
records that request's fail event and leaves the session `failed`, never `finished`."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters.llama.ledger import LedgerResult, record_log
from adapters.llama.logread import LogFormatError, LogReading
from adapters.llama.provenance import BACKEND, Provenance, session_config
from adapters.llama.responses import Responses
from eventlog import Recorder, SessionStatus, create_session, open_db
from fsm.event import Event
from specledger.api import code_version


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


@dataclass(frozen=True)
class LlamaSession:
    """A stored llama.cpp session: its id, the ledger's result and the stored config."""

    session_id: int
    ledger: LedgerResult
    config: dict[str, Any]


def store_llama_session(db: str, reading: LogReading, prov: Provenance, *,
                        responses: Responses | None = None,
                        prompts: Sequence[list[int] | None] = (),
                        parent_id: int | None = None) -> LlamaSession:
    """Record `reading` (and `responses`) as a new session in the log at `db`; a log
    that holds no request is refused, and nothing is recorded."""
    journal = UnitJournal()
    result = record_log(reading, journal, prompts=prompts,
                        responses=responses.facts if responses is not None else ())
    if not result.fold.tasks:
        raise LogFormatError(f"{prov.log_path} holds no request: llama-server started "
                             f"({reading.lines} line(s)) but logged no task; nothing "
                             "recorded (pass the log of a server that answered requests)")
    config = session_config(reading, result.fold, prov, responses, result.responses_matched)
    engine = open_db(db, create=True)
    run = prov.run or {}
    sid = create_session(engine, config=config, backend=BACKEND,
                         seeds={"seed": run["seed"]} if "seed" in run else {},
                         code_version=code_version(), model_digest=prov.model_sha256,
                         parent_id=parent_id)
    with Recorder(engine, sid) as rec:
        start = 0
        for end in journal.ends:
            for ev in journal.events[start:end]:
                rec.append(ev)
            rec.end_unit()
            start = end
        rec.close(SessionStatus.FAILED if result.truncated else SessionStatus.FINISHED)
    return LlamaSession(sid, result, config)
