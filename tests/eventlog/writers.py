"""Writer processes for the many-writers test: `python -m tests.eventlog.writers ROLE URL ...`.

Each prints `ready` and waits for a line on stdin, so that all of them start at once; then:

- `record URL WRITER SESSIONS ROUNDS`: records SESSIONS sessions side by side, a round to
  each in turn, with irregular flushes (some mid-round), and prints `sessions ID ...`;
- `victim URL ROUNDS KILL_AT`: records one session, a transaction per round, and stops
  inside the transaction of round KILL_AT, just before its commit, printing
  `open FIRST LAST` (its seqs) for the test to SIGKILL it there;
- `stale URL`: reads a session id on stdin, then appends seqs 0..5 to it as a writer that
  thinks the log is empty, and prints `rejected` when the recorder refuses.
"""

import random
import sys
import time
from typing import Any

from sqlalchemy import Engine, event

from eventlog import Recorder, StaleWriterError, count_events, create_session, open_db
from fsm.event import Event
from fsm.states import RoundState, Trigger

UNIT = 6
"""Events per round."""


def round_events(writer: int, session: int, rnd: int) -> list[Event]:
    """Round `rnd` of `session`: its payloads name their writer, session, round and place."""
    s = RoundState
    return [Event(rnd * UNIT + i, writer % 4, 1, rnd, Trigger.LIVELOCK, s.IDLE, s.IDLE,
                  float(rnd), 0.0, {"w": writer, "s": session, "r": rnd, "i": i,
                                    "append": list(range(i * 4))})
            for i in range(UNIT)]


def _record(engine: Engine, writer: int, sessions: int, rounds: int) -> None:
    rng = random.Random(writer)
    ids = [create_session(engine, config={"writer": writer, "session": s}, backend="sim",
                          seeds={}, code_version="many-writers") for s in range(sessions)]
    print("sessions", *ids, flush=True)
    recs = [Recorder(engine, sid, flush_events=rng.randint(1, 40), flush_ms=1e9) for sid in ids]
    for rnd in range(rounds):
        for s, rec in enumerate(recs):
            for i, ev in enumerate(round_events(writer, s, rnd)):
                if i == 3 and rng.random() < 0.1:
                    rec.flush()  # mid-round: must write nothing of this round
                rec.append(ev)
            rec.end_unit()
    for rec in recs:
        rec.close()


def _victim(engine: Engine, rounds: int, kill_at: int) -> None:
    sid = create_session(engine, config={"writer": "victim"}, backend="sim", seeds={},
                         code_version="many-writers")
    flushes = [0]  # transactions that wrote rounds (a round each): the session's n_events

    @event.listens_for(engine, "before_cursor_execute")
    def _count(conn: Any, cursor: Any, statement: str, params: Any, context: Any,
               executemany: bool) -> None:
        if statement.startswith("UPDATE sessions") and "n_events" in statement:
            flushes[0] += 1

    @event.listens_for(engine, "commit")
    def _stop(conn: Any) -> None:
        if flushes[0] == kill_at + 1:  # this transaction holds round `kill_at`
            print("open", kill_at * UNIT, kill_at * UNIT + UNIT - 1, flush=True)
            time.sleep(600)  # inside the transaction, until the SIGKILL

    rec = Recorder(engine, sid, flush_events=1)
    for rnd in range(rounds):
        for ev in round_events(-1, 0, rnd):
            rec.append(ev)
        rec.end_unit()
    rec.close()


def _stale(engine: Engine, sid: int) -> None:
    while count_events(engine, sid) < 2 * UNIT:
        time.sleep(0.01)
    rec = Recorder(engine, sid)
    for ev in round_events(99, 0, 0):
        rec.append(ev)
    rec.end_unit()
    try:
        rec.flush()
    except StaleWriterError as exc:
        print("rejected", exc, flush=True)


def main(argv: list[str]) -> None:
    """Run one writer role (see the module docstring)."""
    role, url, *rest = argv
    print("ready", flush=True)
    go = sys.stdin.readline().split()
    engine = open_db(url, True)  # all at once: creating the schema races too
    if role == "record":
        _record(engine, *(int(x) for x in rest))
    elif role == "victim":
        _victim(engine, *(int(x) for x in rest))
    else:
        _stale(engine, int(go[1]))
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
