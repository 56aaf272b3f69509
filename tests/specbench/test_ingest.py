"""The ingest suite: a quick run writes its results with both fleets' goals, its rate is
the events the ledger holds over time measured around the writers, and the check after
each measurement catches a ledger that lost an event."""

import json
import pickle
import time
from pathlib import Path

import pytest
from sqlalchemy import delete, func, select

from engine.config import RunConfig
from engine.session import Session
from eventlog import count_events, open_db
from eventlog.schema import events
from specbench import BenchOptions, run_suite
from specbench.ingest import FLEET, QUICK
from specbench.ingest.journal_script import ScriptJournal
from specbench.ingest.runs import check, measure
from specledger.api import run_session


@pytest.mark.usefixtures("pg_cluster")  # the suite starts its own server: same binaries
def test_quick_run_measures_every_fleet_and_keeps_its_goals(tmp_path: Path) -> None:
    opts = BenchOptions(out=tmp_path, db=str(tmp_path / "b.db"), quick=True)
    result = run_suite("ingest", opts)
    doc = json.loads((tmp_path / "ingest" / "results.json").read_text())
    setups = [(r["backend"], r["writers"]) for r in doc["runs"]]
    assert setups == [("sqlite", 1), ("sqlite", 4), ("postgresql", 1), ("postgresql", 8)]
    # what each writer plays: the seed session as the recorder stores it
    seed = run_session(QUICK.seed.replace(seed=opts.seed), str(tmp_path / "seed.db"))
    per_session = count_events(open_db(str(tmp_path / "seed.db"), create=False),
                               seed.session_id)
    for r in doc["runs"]:
        assert r["events_per_session"] == per_session
        assert r["events"] == r["writers"] * r["sessions"] * per_session
        assert len(r["writer_s"]) == r["writers"] and r["problems"] == []
        # the wall clock runs from go to the last writer's end: it holds each writer's time
        assert 0 < max(r["writer_s"]) <= r["wall_s"]
        assert r["events_per_s"] <= r["events"] / max(r["writer_s"])
    assert [g.name.split(" recording")[0] for g in result.goals] == [
        f"{n} writers" for n in FLEET.values()]
    assert all(g.met and g.measured.startswith("0 problems") for g in result.goals)
    assert (tmp_path / "ingest" / "ingest.svg").is_file()


def _script(tmp_path: Path) -> tuple[Path, int]:
    """A recorded sim session's journal calls, pickled for the writers; its event count."""
    journal = ScriptJournal()
    Session(RunConfig(backend="sim", turns=1, prompt_tokens=32, answer_tokens=40), journal).run()
    script = tmp_path / "script.pickle"
    script.write_bytes(pickle.dumps(journal.calls))
    return script, journal.events


def test_the_rate_is_the_events_stored_over_the_writers_time(tmp_path: Path) -> None:
    script, n = _script(tmp_path)
    url = str(tmp_path / "ledger.db")
    began = time.perf_counter()
    run = measure("sqlite", url, script, n, writers=2, sessions=2)
    outside = time.perf_counter() - began  # start-up and the check included
    with open_db(url, False).connect() as conn:
        stored = conn.scalar(select(func.count()).select_from(events))
    assert run.problems == () and run.events == stored == 4 * n
    assert 0 < max(run.writer_s) <= run.wall_s <= outside
    assert stored / outside <= run.events_per_s <= stored / max(run.writer_s)


def test_the_check_catches_a_lost_event(tmp_path: Path) -> None:
    script, n = _script(tmp_path)
    url = str(tmp_path / "ledger.db")
    run = measure("sqlite", url, script, n, writers=2, sessions=2)
    assert run.problems == ()
    with open_db(url, True).begin() as conn:
        conn.execute(delete(events).where(events.c.session_id == 3, events.c.seq == 5))
    assert check(url, run) == (f"session 3: {n - 1} events at seqs 1..{n}, {n} recorded",)
