"""The ingest suite: a quick run writes its results with both fleets' goals, and the check
after each measurement catches a ledger that lost an event."""

import json
import pickle
from pathlib import Path

import pytest
from sqlalchemy import delete

from engine.config import RunConfig
from engine.session import Session
from eventlog import open_db
from eventlog.schema import events
from specbench import BenchOptions, run_suite
from specbench.ingest import FLEET
from specbench.ingest_runs import check, measure
from specbench.journal_script import ScriptJournal


@pytest.mark.usefixtures("pg_cluster")  # the suite starts its own server: same binaries
def test_quick_run_measures_every_fleet_and_keeps_its_goals(tmp_path: Path) -> None:
    result = run_suite("ingest", BenchOptions(out=tmp_path, db=str(tmp_path / "b.db"),
                                              quick=True))
    doc = json.loads((tmp_path / "ingest" / "results.json").read_text())
    setups = [(r["backend"], r["writers"]) for r in doc["runs"]]
    assert setups == [("sqlite", 1), ("sqlite", 4), ("postgresql", 1), ("postgresql", 8)]
    for r in doc["runs"]:
        assert r["events"] == r["writers"] * r["sessions"] * r["events_per_session"] > 0
        assert r["events_per_s"] == pytest.approx(r["events"] / r["wall_s"])
        assert len(r["writer_s"]) == r["writers"] and r["problems"] == []
    assert [g.name.split(" recording")[0] for g in result.goals] == [
        f"{n} writers" for n in FLEET.values()]
    assert all(g.met and g.measured.startswith("0 problems") for g in result.goals)
    assert (tmp_path / "ingest" / "ingest.svg").is_file()


def test_the_check_catches_a_lost_event(tmp_path: Path) -> None:
    journal = ScriptJournal()
    Session(RunConfig(backend="sim", turns=1, prompt_tokens=32, answer_tokens=40), journal).run()
    script = tmp_path / "script.pickle"
    script.write_bytes(pickle.dumps(journal.calls))
    url = str(tmp_path / "ledger.db")
    run = measure("sqlite", url, script, journal.events, writers=2, sessions=2)
    assert run.events == 4 * journal.events and run.problems == ()
    with open_db(url, True).begin() as conn:
        conn.execute(delete(events).where(events.c.session_id == 3, events.c.seq == 5))
    n = journal.events
    assert check(url, run) == (f"session 3: {n - 1} events at seqs 1..{n}, {n} recorded",)
