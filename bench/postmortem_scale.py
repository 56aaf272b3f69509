"""Projection replay, postmortem and self-diff of a 1,000,000-event session.

A real sim session (legacy EOG policy and a re-verifying replay under near-ties, so the
postmortem has stray tokens, re-prefill and livelocks to find) is recorded once, then its
turns are repeated with renumbered seqs and turns until the session holds `--events`
events: recording a million events through the engine would measure the engine, not the
readers. Every timing reads the whole session from SQLite.

    python bench/postmortem_scale.py [--events N] [--out PATH]
"""

import argparse
import json
import platform
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlalchemy

from engine.config import RunConfig
from eventlog import iter_events, open_db, project
from eventlog.diff import diff_streams
from eventlog.postmortem import postmortem_session
from eventlog.reader import scan_events
from specledger.api import run_session

SEED = RunConfig(eog_policy="legacy", replay_policy="reverify", tie_flip_rate=0.02,
                 acceptance=0.8, turns=4, prompt_tokens=2048, question_tokens=32,
                 answer_tokens=2500, seed=3)
COLUMNS = "seq, slot, turn, round, trigger, source, dest, t, duration, payload"


def build(db: str, target: int) -> tuple[int, int]:
    """Record the seed session and grow it to `target` events; (session id, events)."""
    sid = run_session(SEED, db).session_id
    con = sqlite3.connect(db)
    rows = con.execute(f"SELECT {COLUMNS} FROM events WHERE session_id = ? ORDER BY seq",
                       (sid,)).fetchall()
    n, turns = len(rows), max(r[2] for r in rows)
    copies = 1
    with con:
        while n * copies < target:
            shift_seq, shift_turn = n * copies, turns * copies
            batch = [(sid, r[0] + shift_seq, r[1], r[2] + shift_turn, *r[3:]) for r in rows]
            if n * (copies + 1) > target:
                batch = batch[: target - n * copies]
            con.executemany(f"INSERT INTO events (session_id, {COLUMNS}) VALUES "
                            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", batch)
            copies += 1
        total = con.execute("SELECT count(*) FROM events WHERE session_id = ?",
                            (sid,)).fetchone()[0]
        con.execute("UPDATE sessions SET n_events = ? WHERE id = ?", (total, sid))
    con.close()
    return sid, total


def timed(fn: Any) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    """Build the session, time every reader over it, write the results file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" /
                                          "postmortem_scale.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "scale.db")
        build_s, (sid, n) = timed(lambda: build(db, args.events))
        engine = open_db(db, create=False)
        proj_s, views = timed(lambda: project(scan_events(engine, sid)))
        keyset_s, _ = timed(lambda: project(iter_events(engine, sid)))
        pm_s, pm = timed(lambda: postmortem_session(engine, sid))
        diff_s, diff = timed(lambda: diff_streams(scan_events(engine, sid),
                                                  scan_events(engine, sid)))
        cli_s, cli = timed(lambda: subprocess.run(
            [sys.executable, "-m", "specledger", "postmortem", str(sid), "--db", db, "--json"],
            capture_output=True, text=True, check=False))
        db_bytes = Path(db).stat().st_size
    assert diff.divergence is None and cli.returncode == 1  # legacy EOG: an error finding
    result = {
        "events": n,
        "build_s": build_s,
        "projection_replay": {"s": proj_s, "events_per_s": n / proj_s,
                              "tokens": sum(len(v.tokens) for v in views.values())},
        "projection_replay_keyset_pages": {"s": keyset_s, "events_per_s": n / keyset_s},
        "postmortem": {"s": pm_s, "events_per_s": n / pm_s,
                       "findings": {f.kind.value: f.severity.value for f in pm.findings}},
        "diff_with_itself": {"s": diff_s, "events_per_s": 2 * n / diff_s},
        "cli_postmortem_json_s": cli_s,
        "db_bytes_per_event": db_bytes / n,
        "env": {"python": platform.python_version(), "sqlalchemy": sqlalchemy.__version__,
                "sqlite": sqlite3.sqlite_version, "machine": platform.machine()},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
