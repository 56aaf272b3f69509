"""A run killed with SIGKILL leaves a log that every reader accepts: the session reads as
`incomplete` and only whole rounds are visible."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict

from eventlog import count_events, list_sessions, open_db, scan_events
from fsm.states import Trigger

UNIT_ENDS = {Trigger.NEXT, Trigger.END_TURN}


def test_sigkill_mid_run_leaves_whole_rounds(db_url: str) -> None:
    db = db_url
    proc = subprocess.Popen(
        [sys.executable, "-m", "specledger", "run", "--backend", "sim", "--db", db,
         "--turns", "50",
         "--answer-tokens", "5000", "--prompt-tokens", "256", "--json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        written = 0
        while time.monotonic() < deadline and written < 3000:
            time.sleep(0.2)
            try:
                written = count_events(open_db(db, create=False), 1)
            except Exception:  # the schema may not exist yet
                written = 0
        assert written >= 3000, "the run wrote nothing in time"
        assert proc.poll() is None, "the run ended before it could be killed"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([sys.executable, "-m", "specledger", *argv, "--db", db],
                           capture_output=True, text=True, timeout=120, check=False)
        assert r.returncode == 0 and not r.stderr, r.stderr
        return r

    sessions = json.loads(cli("sessions", "--json").stdout)
    assert sessions[0]["status"] == "incomplete"
    cli("show", "1")
    replay = json.loads(cli("replay", "1", "--json").stdout)
    assert replay["seq"] == sessions[0]["events"]

    engine = open_db(db, create=False)
    assert list_sessions(engine)[0].status.value == "incomplete"
    rounds: dict[tuple[int, int, int], list[Trigger]] = defaultdict(list)
    seqs = []
    for ev in scan_events(engine, 1):
        seqs.append(ev.seq)
        if ev.round > 0:
            rounds[(ev.slot, ev.turn, ev.round)].append(ev.trigger)
    assert seqs == list(range(1, len(seqs) + 1))  # no gap: whole flushes only
    assert rounds
    for key, triggers in rounds.items():
        assert Trigger.COMMIT in triggers, key
        assert triggers[-1] in UNIT_ENDS, (key, triggers[-1])
