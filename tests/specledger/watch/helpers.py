"""Drive a watcher over a captured llama-server log appended piece by piece."""

import random
from pathlib import Path

from sqlalchemy import select

from eventlog import open_db
from eventlog.schema import sessions
from specledger.watch.loop import Watcher, WatchOptions
from specledger.watch.store import requests
from tests.specledger.watch.test_stream import fixture_bytes


def drip(watcher: Watcher, log: Path, data: bytes, seed: int = 0, most: int = 4000) -> None:
    """Append `data` to `log` in random pieces (cut anywhere, mid-line too), one poll of
    `watcher` after each."""
    rng = random.Random(seed)
    pos = 0
    with log.open("ab") as out:
        while pos < len(data):
            n = rng.randint(1, most)
            out.write(data[pos:pos + n])
            out.flush()
            pos += n
            watcher.step()


def watched(log: Path, db: str, *names: str, **opts: object) -> Watcher:
    """A watcher (settling at once) that has read the named fixtures appended to `log`
    one after another, and stopped."""
    log.touch()
    w = Watcher(WatchOptions(log=log, db=db, settle_s=0.0, **opts), lambda _: None)  # type: ignore[arg-type]
    for i, name in enumerate(names):
        drip(w, log, fixture_bytes(name), seed=i)
    w.finish()
    return w


def rows(db: str) -> list[tuple[int, str, int, int, str]]:
    """(session, status, slot, task, key) of every request recorded, in session order."""
    engine = open_db(db, create=False)
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(
            select(requests.c.session_id, sessions.c.status, requests.c.slot,
                   requests.c.task, requests.c.key)
            .join(sessions, sessions.c.id == requests.c.session_id)
            .order_by(requests.c.session_id))]
