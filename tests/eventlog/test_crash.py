"""A writer killed with SIGKILL leaves whole rounds, and readers call its session incomplete."""

import os
import signal
import subprocess
import sys
import time
from itertools import groupby

from eventlog import SessionStatus, count_events, get_session, open_db, scan_events

# Writes 6-event rounds forever. flush_events=50 is not a multiple of 6, and every 5th round
# calls flush() half-way through, so a recorder that wrote partial rounds would show it.
_WRITER = """
import sys
from eventlog import Recorder, create_session, open_db
from fsm.event import Event
from fsm.states import RoundState, Trigger

engine = open_db(sys.argv[1], True)
sid = create_session(engine, config={}, backend="sim", seeds={}, code_version="crash")
rec = Recorder(engine, sid, flush_events=50, flush_ms=1e9)
print(sid, flush=True)
seq = rnd = 0
while True:
    for i in range(6):
        if i == 3 and rnd % 5 == 0:
            rec.flush()
        rec.append(Event(seq, 0, 0, rnd, Trigger.LIVELOCK, RoundState.IDLE, RoundState.IDLE,
                         0.0, 0.0, {"append": [seq] * 20, "i": i}))
        seq += 1
    rec.end_unit()
    rnd += 1
"""


def test_sigkilled_writer_leaves_whole_rounds_and_an_incomplete_session(db_url: str) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, db_url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None
        sid = int(writer.stdout.readline())
        reader = open_db(db_url, False)
        assert get_session(reader, sid).status is SessionStatus.RUNNING
        deadline = time.monotonic() + 20
        while count_events(reader, sid) < 3000 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()  # reaped: a zombie would still answer kill(pid, 0)
    reader = open_db(db_url, False)
    info = get_session(reader, sid)
    assert info.status is SessionStatus.INCOMPLETE
    n = count_events(reader, sid)
    assert n >= 3000
    assert n % 6 == 0
    assert info.events == n
    stored = list(scan_events(reader, sid))
    assert [e.seq for e in stored] == list(range(n))
    rounds = [[e.payload["i"] for e in g] for _, g in groupby(stored, key=lambda e: e.round)]
    assert all(r == list(range(6)) for r in rounds)
