"""Store a llama-server log (with the client's answers, when there are some) as a session:
the ledger runs first into memory, so the session is created with its whole provenance
(which needs the fold's counts), then the events go to the recorder unit by unit, so
each database transaction still holds whole rounds (specledger/runs/observed.py). A log that
ends inside a request records that request's fail event and leaves the session `failed`,
never `finished`."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapters.llama.ledger.provenance import BACKEND, Provenance, session_config
from adapters.llama.ledger.record import LedgerResult, record_log
from adapters.llama.ledger.responses import Responses
from adapters.llama.ledger.tasks import CutReason
from adapters.llama.log.reader import LogFormatError, LogReading
from adapters.llama.log.run import RunEnd
from adapters.protocol import Recording, Sink
from specledger.runs.observed import UnitJournal, store_journal


@dataclass(frozen=True)
class LlamaSession:
    """A stored llama.cpp session: its id, the ledger's result and the stored config."""

    session_id: int
    ledger: LedgerResult
    config: dict[str, Any]


def record_llama(reading: LogReading, prov: Provenance, sink: Sink, *,
                 responses: Responses | None = None,
                 prompts: Sequence[list[int] | None] = ()) -> tuple[LedgerResult, Recording]:
    """Fire `reading`'s tasks (and `responses`) into `sink`: the ledger's result and the
    session to store. A log that holds no request is refused."""
    result = record_log(reading, sink, prompts=prompts,
                        responses=responses.facts if responses is not None else ())
    if not result.fold.tasks and reading.ending is not RunEnd.DIED:
        raise LogFormatError(f"{prov.log_path} holds no request: llama-server started "
                             f"({reading.lines} line(s)) but logged no task; nothing "
                             "recorded (pass the log of a server that answered requests)")
    config = session_config(reading, result.fold, prov, responses, result.responses_matched)
    run = prov.run or {}
    error = _run_error(reading, result)
    return result, Recording(config, BACKEND, run.get("seed"), prov.model_sha256,
                             result.turns, result.violations, result.events, error)


def _run_error(reading: LogReading, result: LedgerResult) -> str | None:
    """Why the session is `failed`: the server died, or the log does not show the end of
    a task (None: neither)."""
    if reading.ending is RunEnd.DIED:
        return (f"the server's run ends at line {reading.last_line} without its shutdown "
                "lines: it died")
    cut = next((c for c in result.truncated if c.why is CutReason.LOG_ENDS), None)
    if cut is None:
        return None
    return f"the log ends inside task {cut.task} (slot {cut.slot}, line {cut.line})"


def store_llama_session(db: str, reading: LogReading, prov: Provenance, *,
                        responses: Responses | None = None,
                        prompts: Sequence[list[int] | None] = (),
                        parent_id: int | None = None) -> LlamaSession:
    """Record `reading` (and `responses`) as a new session in the log at `db`; a log
    that holds no request is refused, and nothing is recorded."""
    journal = UnitJournal()
    result, rec = record_llama(reading, prov, journal, responses=responses, prompts=prompts)
    sid = store_journal(db, journal, rec, parent_id)
    return LlamaSession(sid, result, rec.config)
