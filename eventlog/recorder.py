"""The recorder: buffers events and writes whole units (rounds) with group commit.

A unit is everything appended between two `end_unit()` calls. Only complete units are
ever written, one database transaction per flush, so a crash leaves whole rounds or
nothing. A flush happens when `flush_events` complete events are buffered or `flush_ms`
passed since the last one (checked at `end_unit`), on `flush()` (every turn end) and on
`close()`.

With `check_payloads` (default: the environment variable SPECLEDGER_CHECK_PAYLOADS=1,
which tests set) every event's payload must be its trigger's type (fsm/payloads.py), or
`append` raises `PayloadError`; off, appending costs nothing more.
"""

import os
import socket
import time
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self

from sqlalchemy import Engine, select

from eventlog.errors import StaleWriterError, UnknownSessionError
from eventlog.inserts import event_row, integrity_errors, row_inserter
from eventlog.liveness import hold_writer_lock
from eventlog.schema import SessionStatus, events, sessions
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
    """Store a new `running` session with everything needed to re-execute it; return its id."""
    now = datetime.now(UTC)
    with engine.begin() as conn:
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
        return int(result.inserted_primary_key[0])


class Recorder:
    """The `fsm.machine.EventSink` that writes one session's events to the database.

    Constructing it claims the session for this process (writer pid, host, heartbeat).
    As a context manager it closes the session `finished`, or `failed` on an exception.
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
        self._complete = 0  # buffered events that form whole units
        self._closed = False
        self._writer = {"writer_pid": os.getpid(), "writer_host": socket.gethostname()}
        with engine.begin() as conn:
            claimed = conn.execute(
                sessions.update()
                .where(sessions.c.id == session_id)
                .values(heartbeat=datetime.now(UTC), **self._writer)
            ).rowcount
        if not claimed:
            raise UnknownSessionError(f"no session {session_id} to record into; create it first")
        self._last_flush = time.monotonic()
        self._insert = row_inserter(engine)
        self._integrity = integrity_errors(engine)
        self._lock = hold_writer_lock(engine, session_id)
        if check_payloads if check_payloads is not None else os.environ.get(CHECK_ENV) == "1":
            self.append = self._checked_append

    def append(self, event: Event) -> None:
        """Buffer one event; it is written once its unit is complete."""
        self._buffer.append(event)

    def _checked_append(self, event: Event) -> None:
        problems = check_payload(event.trigger, event.payload)
        if problems:
            raise PayloadError(f"seq {event.seq} {event.trigger}: {'; '.join(problems)} "
                               "(docs/events.md)")
        self._buffer.append(event)

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
            try:
                self._write(status)
            finally:
                self._closed = True
                self._buffer.clear()
                self._release()

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
        try:
            self.close(SessionStatus.FAILED)
        except Exception as err:
            # The run's own exception is the one to show; keep this one as a note on it.
            exc.add_note(f"also, closing session {self.session_id} failed: {err}")

    def _write(self, status: SessionStatus | None) -> None:
        if self._closed:
            raise RuntimeError(f"the recorder of session {self.session_id} is closed")
        n = self._complete
        if n == 0 and status is None:
            return
        sid = self.session_id
        rows = [event_row(sid, e) for e in self._buffer[:n]]
        # Re-stamping the writer at each flush takes the session back from a stale writer
        # that claimed it, so readers judge liveness by the process that really writes.
        values: dict[str, Any] = {
            "heartbeat": datetime.now(UTC),
            "n_events": sessions.c.n_events + n,
            **self._writer,
        }
        if status is not None:
            values["status"] = status.value
        try:
            with self.engine.begin() as conn:
                if rows:
                    self._insert(conn, rows)
                conn.execute(sessions.update().where(sessions.c.id == sid).values(**values))
        except self._integrity as exc:
            self._closed = True
            self._release()
            first, last = self._buffer[0].seq, self._buffer[n - 1].seq
            raise self._stale(first, last) from exc
        del self._buffer[:n]
        self._complete = 0
        self.written += n
        self._last_flush = time.monotonic()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()

    def _stale(self, first: int, last: int) -> StaleWriterError:
        with self.engine.connect() as conn:
            top = conn.scalar(
                select(events.c.seq)
                .where(events.c.session_id == self.session_id)
                .order_by(events.c.seq.desc())
                .limit(1)
            )
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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None
