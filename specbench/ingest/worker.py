"""One writer process of the ingest suite:
`python -m specbench.ingest.worker URL SCRIPT SESSIONS`.

It loads a recorded session's journal calls (SCRIPT, a pickle of `JournalCall`s: append,
end of unit, flush), prints `ready`, waits for `go` on stdin so that every writer starts
at once, then plays the calls into SESSIONS new sessions of the ledger at URL, one after
another, through the real `Recorder` with its default group commit, and prints
`done EVENTS SECONDS`. No engine runs here: what is measured is the ledger's ingest.
"""

import pickle
import sys
import time
from pathlib import Path

from eventlog import Recorder, create_session, open_db
from specbench.ingest.journal_script import Call, JournalCall, play


def main(argv: list[str]) -> None:
    """Record the script into `SESSIONS` sessions once told to go."""
    url, script, sessions = argv[0], Path(argv[1]), int(argv[2])
    calls: list[JournalCall] = pickle.loads(script.read_bytes())
    n = sum(c.call is Call.APPEND for c in calls)
    engine = open_db(url, True)
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.perf_counter()
    for _ in range(sessions):
        sid = create_session(engine, config={"ingest": True}, backend="sim", seeds={},
                             code_version="ingest")
        play(Recorder(engine, sid), calls)
    print("done", n * sessions, time.perf_counter() - start, flush=True)
    engine.dispose()


if __name__ == "__main__":
    main(sys.argv[1:])
