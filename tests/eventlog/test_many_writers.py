"""Many writer processes on one ledger at once (8 on PostgreSQL, 4 on a SQLite file): no
event lost, duplicated or mixed into another session, seqs gap-free per session, a stale
writer rejected, and a writer SIGKILLed inside a transaction losing only its open round."""

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from itertools import groupby
from pathlib import Path

import pytest

from eventlog import SessionStatus, count_events, get_session, list_sessions, open_db, scan_events
from tests.eventlog.writers import UNIT, round_events

ROOT = Path(__file__).resolve().parents[2]
WRITERS = {"sqlite": 4, "postgresql": 8}
SESSIONS = 2  # per writer, recorded side by side
ROUNDS = 120
KILL_AT = 40  # the victim's round whose transaction never commits


def _spawn(*argv: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.eventlog.writers", *map(str, argv)],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _say(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def _line(proc: subprocess.Popen[str]) -> list[str]:
    assert proc.stdout is not None
    return proc.stdout.readline().split()


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """The writer processes a test starts; none outlives it."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def test_concurrent_writers_keep_every_session_whole(
    db_url: str, procs: list[subprocess.Popen[str]]
) -> None:
    n = WRITERS["postgresql" if db_url.startswith("postgresql") else "sqlite"]
    writers = [_spawn("record", db_url, w, SESSIONS, ROUNDS) for w in range(n)]
    victim, stale = _spawn("victim", db_url, ROUNDS, KILL_AT), _spawn("stale", db_url)
    procs += [*writers, victim, stale]
    assert [_line(p) for p in procs] == [["ready"]] * len(procs)
    for proc in (*writers, victim):
        _say(proc, "go")
    # First the kill: on SQLite the paused victim holds the write lock everyone waits for.
    word, open_first, open_last = _line(victim)
    assert word == "open"
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()  # reaped: a zombie would still answer kill(pid, 0)
    ids = [[int(x) for x in _line(proc)[1:]] for proc in writers]
    _say(stale, f"go {ids[1][0]}")
    assert [_line(p) for p in writers] == [["done"]] * n
    assert _line(stale)[0] == "rejected"
    assert [p.wait(timeout=60) for p in (*writers, stale)] == [0] * (n + 1)

    engine = open_db(db_url, False)
    infos = {s.id: s for s in list_sessions(engine)}
    assert len(infos) == n * SESSIONS + 1
    for sid, info in infos.items():
        stored = list(scan_events(engine, sid))
        seqs = [e.seq for e in stored]
        assert seqs == list(range(len(stored))), f"session {sid}: gaps or duplicates"
        assert info.events == count_events(engine, sid) == len(stored)
        if info.config["writer"] == "victim":
            assert info.status is SessionStatus.INCOMPLETE
            assert int(open_last) - int(open_first) == UNIT - 1
            assert len(stored) == int(open_first) == KILL_AT * UNIT  # only the open round lost
            writer, session = -1, 0
        else:
            assert info.status is SessionStatus.FINISHED
            assert len(stored) == ROUNDS * UNIT
            writer, session = info.config["writer"], info.config["session"]
        expected = [e for rnd in range(len(stored) // UNIT)
                    for e in round_events(writer, session, rnd)]
        assert stored == expected  # nothing from another writer or session, in order
        rounds = [[e.payload["i"] for e in g] for _, g in groupby(stored, key=lambda e: e.round)]
        assert all(r == list(range(UNIT)) for r in rounds)
    assert get_session(engine, ids[1][0]).events == ROUNDS * UNIT  # the stale one added none
