"""The scale suite's long session: a real sim session grown to any number of events.

The seed session (legacy EOG policy and a re-verifying replay under near-ties, so the
postmortem has stray tokens, re-prefill and livelocks to find) is recorded once through
the engine; then its turns are repeated with renumbered seqs and turns, straight into the
SQLite file, until the session holds the events asked for, each copied turn that ends with
its summary (eventlog/turn_summaries.py) as the recorder writes it. Recording ten million
events through the engine would measure the engine, not the readers.
"""

import json
import sqlite3
from pathlib import Path

from engine.config import RunConfig
from specledger.api import run_session

SEED = RunConfig(eog_policy="legacy", replay_policy="reverify", tie_flip_rate=0.02,
                 acceptance=0.8, turns=4, prompt_tokens=2048, question_tokens=32,
                 answer_tokens=2500, seed=3)
_COLUMNS = "seq, slot, turn, round, trigger, dest, body"


def _renumbered(body: str, seq: int, turn: int) -> str:
    """`body` (eventlog.schema.BODY: it opens with seq, slot, turn) with a new seq and turn."""
    _seq, slot, _turn, rest = body.split(",", 3)
    return f"[{seq},{slot},{turn},{rest}"


def _summary(row: tuple[int, int, int, int, str], seqs: int, turns: int
             ) -> tuple[int, int, int, int, str]:
    """A turn summary (end_seq, slot, turn, events, body) moved on by `seqs` and `turns`."""
    end_seq, slot, turn, n, body = row
    doc = json.loads(body)
    if doc["metrics"] is not None:
        doc["metrics"]["turn"] += turns
    return end_seq + seqs, slot, turn + turns, n, json.dumps(doc)


def build(db: Path, target: int, seed: RunConfig = SEED) -> tuple[int, int]:
    """Record the seed session into the new SQLite ledger `db` and grow it to `target`
    events; (session id, events)."""
    sid = run_session(seed, str(db)).session_id
    con = sqlite3.connect(db)
    try:
        rows = con.execute(f"SELECT {_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq",
                           (sid,)).fetchall()
        summaries = con.execute("SELECT end_seq, slot, turn, events, body FROM turns WHERE "
                                "session_id = ? ORDER BY end_seq", (sid,)).fetchall()
        n, turns = len(rows), max(r[2] for r in rows)
        with con:
            copies = 1
            while n * copies < target:
                batch = []
                cut = target - n * copies
                for seq, slot, turn, rnd, trigger, dest, body in rows[:cut]:
                    seq, turn = seq + n * copies, turn + turns * copies
                    batch.append((sid, seq, slot, turn, rnd, trigger, dest,
                                  _renumbered(body, seq, turn)))
                con.executemany(f"INSERT INTO events (session_id, {_COLUMNS}) VALUES "
                                "(?, ?, ?, ?, ?, ?, ?, ?)", batch)
                ended = [(sid, *_summary(r, n * copies, turns * copies))
                         for r in summaries if r[0] <= cut]
                con.executemany("INSERT INTO turns (session_id, end_seq, slot, turn, events, "
                                "body) VALUES (?, ?, ?, ?, ?, ?)", ended)
                copies += 1
            total = con.execute("SELECT count(*) FROM events WHERE session_id = ?",
                                (sid,)).fetchone()[0]
            con.execute("UPDATE sessions SET n_events = ? WHERE id = ?", (total, sid))
    finally:
        con.close()
    return sid, total
