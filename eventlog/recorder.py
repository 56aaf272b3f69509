"""The recorder: buffers events and writes whole units (rounds) with group commit.

A unit is everything appended between two `end_unit()` calls. Only complete units are
ever written, one database transaction per flush, so a crash leaves whole rounds or
nothing. A flush happens when `flush_events` complete events are buffered or `flush_ms`
passed since the last one (checked at `end_unit`), on `flush()` (every turn end) and on
`close()`.

A Ctrl-C never splits a write: each runs with SIGINT held (`eventlog.interrupts`), and a
run that ends by an exception closes its session `failed` (`Recorder.fail`); a session
Ctrl-C left with no recorder to close it is closed by `eventlog.unclosed`.

With `check_payloads` (default: the environment variable SPECLEDGER_CHECK_PAYLOADS=1,
which tests set) every event's payload must be its trigger's type (fsm/payloads.py), or
`append` raises `PayloadError`; off, appending costs nothing more.

Each turn's summary (eventlog/turn_summaries.py) is written in the transaction that writes
its END_TURN, so a reader finds a turn's summary exactly when it finds the turn's end.
"""

import os
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from eventlog.db import begin_waiting, first_line
from eventlog.errors import RecordingFailedError, StaleWriterError, UnknownSessionError
from eventlog.inserts import event_row, integrity_errors, row_inserter
from eventlog.interrupts import interrupts_deferred
from eventlog.liveness import WriterLock, hold_writer_lock
from eventlog.reader import last_seq
from eventlog.records import TurnRecord
from eventlog.schema import SessionStatus, sessions, turns
from eventlog.turn_summaries import TurnSummaries
from eventlog.unclosed import (
    CLOSING_WAIT_S,
    mark_failed,
    not_marked_failed,
    track,
    untrack,
)
from fsm.errors import PayloadError
from fsm.event import Event
from fsm.payload_schema import check_payload

CHECK_ENV = "SPECLEDGER_CHECK_PAYLOADS"


def create_session(
    engine: Engine,
    *,
    config: dict[str, Any],
    backend: str,
    seeds: dict[str, Any],
    code_version: str,
    model_digest: str | None = None,
    parent_id: int | None = None,
) -> int:
    """Store a new `running` session with everything needed to re-execute it; return its id.

    The session is this process's to close from here (`eventlog.unclosed`)."""
    now = datetime.now(UTC)
    with interrupts_deferred(), engine.begin() as conn:
        result = conn.execute(
            sessions.insert().values(
                created=now,
                status=SessionStatus.RUNNING.value,
                config=config,
                backend=backend,
                seeds=seeds,
                code_version=code_version,
                model_digest=model_digest,
                parent_id=parent_id,
                writer_pid=os.getpid(),
                writer_host=socket.gethostname(),
                heartbeat=now,
                n_events=0,
            )
        )
        sid = int(result.inserted_primary_key[0])
        track(engine, sid)
    return sid


class Recorder:
    """The `fsm.machine.EventSink` that writes one session's events to the database.

    Constructing it claims the session for this process (writer pid, host, heartbeat).
    As a context manager it closes the session `finished`, or `failed` on an exception:
    the ledger refusing one of its writes (a full disk, a lost server) becomes one
    `RecordingFailedError` that says whether the session could still be marked `failed`.
    """

    def __init__(
        self,
        engine: Engine,
        session_id: int,
        *,
        flush_events: int = 2000,
        flush_ms: float = 200.0,
        check_payloads: bool | None = None,
    ) -> None:
        self.engine = engine
        self.session_id = session_id
        self.written = 0
        self._flush_events = flush_events
        self._flush_s = flush_ms / 1000.0
        self._buffer: list[Event] = []
        self._summaries = TurnSummaries(session_id)
        self._complete = 0  # buffered events that form whole units
        self._closed = False
        self._writer = {"writer_pid": os.getpid(), "writer_host": socket.gethostname()}
        self._lock: WriterLock | None = None
        self._refused: BaseException | None = None  # the last write the database refused
        with interrupts_deferred():
            with engine.begin() as conn:
                claimed = conn.execute(
                    sessions.update()
                    .where(sessions.c.id == session_id)
                    .values(heartbeat=datetime.now(UTC), **self._writer)
                ).rowcount
            if not claimed:
                raise UnknownSessionError(
                    f"no session {session_id} to record into; create it first")
            self._last_flush = time.monotonic()
            self._insert = row_inserter(engine)
            self._integrity = integrity_errors(engine)
            self._lock = hold_writer_lock(engine, session_id)
            track(engine, session_id, self.fail)
        if check_payloads if check_payloads is not None else os.environ.get(CHECK_ENV) == "1":
            self.append = self._checked_append

    def append(self, event: Event) -> None:
        """Buffer one event; it is written once its unit is complete."""
        self._summaries.apply(event)
        self._buffer.append(event)

    def closing_turns(self) -> Callable[[TurnRecord], None]:
        """For an appender that folds its events with the one fold (the engine's
        `TurnFold`): it hands each turn it closes to the callable returned, and the recorder
        stops folding them a second time."""
        return self._summaries.handed()

    def _checked_append(self, event: Event) -> None:
        problems = check_payload(event.trigger, event.payload)
        if problems:
            raise PayloadError(f"seq {event.seq} {event.trigger}: {'; '.join(problems)} "
                               "(docs/events.md)")
        Recorder.append(self, event)

    def end_unit(self) -> None:
        """Mark everything appended so far as whole units; flush if a threshold is reached."""
        self._complete = len(self._buffer)
        if (
            self._complete >= self._flush_events
            or time.monotonic() - self._last_flush >= self._flush_s
        ):
            self._write(None)

    def flush(self) -> None:
        """Write every complete unit now (an incomplete unit stays buffered)."""
        self._write(None)

    def close(self, status: SessionStatus = SessionStatus.FINISHED) -> None:
        """Write the complete units and set the final status; an incomplete unit is dropped.

        Closing twice, or after a `StaleWriterError`, does nothing.
        """
        if status not in (SessionStatus.FINISHED, SessionStatus.FAILED):
            raise ValueError(f"a session closes 'finished' or 'failed', not '{status}'")
        if not self._closed:
            with interrupts_deferred():
                try:
                    self._write(status)
                finally:
                    self._done()

    def fail(self, wait_s: float | None = None) -> None:
        """Close the session `failed`, with the complete units it can still write; where
        the database refuses them (a full disk) the status alone, which it may still take.
        `wait_s` bounds the wait for the write lock (None: the engine's own). Raises what
        the database said when not even the status could be written."""
        if self._closed:
            return
        with interrupts_deferred():
            try:
                self._write(SessionStatus.FAILED, wait_s)
            except (SQLAlchemyError, OSError):
                mark_failed(self.engine, self.session_id, wait_s)
            finally:
                self._done()

    def _done(self) -> None:
        """No more writes: the buffer dropped, the writer lock released, the session no
        longer this process's to close (`eventlog.unclosed`)."""
        self._closed = True
        self._buffer.clear()
        self._complete = 0
        if self._lock is not None:
            self._lock.release()
        untrack(self.engine, self.session_id)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close(SessionStatus.FINISHED)
            return
        sid, refused = self.session_id, exc is self._refused
        try:
            # Ctrl-C must end the run now, not after another writer's long transaction.
            self.fail(wait_s=CLOSING_WAIT_S if isinstance(exc, KeyboardInterrupt) else None)
            outcome = f"marked failed, its {self.written} events (whole rounds) kept"
        except Exception as err:
            outcome = not_marked_failed(err)
            if not refused:  # the run's own exception is the one to show; this, a note
                exc.add_note(f"session {sid}: {outcome}")
        if refused:
            # The ledger itself failed (a full disk, a lost server): say what became of
            # the session in the one line the user sees.
            raise RecordingFailedError(f"session {sid} failed: {first_line(exc)}; {outcome}"
                                       ) from exc

    def _write(self, status: SessionStatus | None, wait_s: float | None = None) -> None:
        """One transaction: the complete units, and the status when given. The buffer
        forgets the units in the same interrupt-free section, so a Ctrl-C cannot make the
        closing write store them again."""
        if self._closed:
            raise RuntimeError(f"the recorder of session {self.session_id} is closed")
        n = self._complete
        if n == 0 and status is None:
            return
        sid = self.session_id
        rows = [event_row(sid, e) for e in self._buffer[:n]]
        ended = self._summaries.through(self._buffer[n - 1].seq) if n else []
        # Re-stamping the writer at each flush takes the session back from a stale writer
        # that claimed it, so readers judge liveness by the process that really writes.
        values: dict[str, Any] = {
            "heartbeat": datetime.now(UTC),
            "n_events": sessions.c.n_events + n,
            **self._writer,
        }
        if status is not None:
            values["status"] = status.value
        with interrupts_deferred():
            try:
                with begin_waiting(self.engine, wait_s) as conn:
                    if rows:
                        self._insert(conn, rows)
                    if ended:
                        conn.execute(turns.insert(), ended)
                    conn.execute(sessions.update().where(sessions.c.id == sid).values(**values))
            except self._integrity as exc:
                first, last = self._buffer[0].seq, self._buffer[n - 1].seq
                self._done()
                raise self._stale(first, last) from exc
            except (SQLAlchemyError, OSError) as exc:
                self._refused = exc
                raise
            del self._buffer[:n]
            self._summaries.stored(len(ended))
            self._complete = 0
            self.written += n
            self._last_flush = time.monotonic()

    def _stale(self, first: int, last: int) -> StaleWriterError:
        top = last_seq(self.engine, self.session_id)
        return StaleWriterError(
            f"session {self.session_id}: seq {first}..{last} collides with events another "
            f"writer already stored (the log ends at seq {top}); this writer is stale, "
            "record into a new session"
        )


class NullRecorder:
    """An `EventSink` with the recorder's interface that discards everything: the
    baseline for measuring what recording costs."""

    def append(self, event: Event) -> None:
        """Discard the event."""

    def end_unit(self) -> None:
        """Nothing to mark."""

    def flush(self) -> None:
        """Nothing to write."""

    def close(self, status: SessionStatus = SessionStatus.FINISHED) -> None:
        """Nothing to close."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None
