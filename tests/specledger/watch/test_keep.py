"""The keep stage: a request is written as its own session, or held in the ring until a
finding fires; the session a fired request names is its own, whatever order the requests
reached the ring in."""

from pathlib import Path

from eventlog import open_db
from specledger.watch.intake import LogIntake
from specledger.watch.keep import Keeper
from specledger.watch.options import WatchOptions
from specledger.watch.requests import Request
from specledger.watch.store import ensure_tables
from specledger.watch.tally import WatchTally
from tests.specledger.watch.helpers import rows
from tests.specledger.watch.test_stream import fixture_bytes


def _requests(opts: WatchOptions, name: str) -> list[Request]:
    """The requests of a whole captured log, as the intake cuts them."""
    opts.log.write_bytes(fixture_bytes(name))
    engine = open_db(opts.db, create=True)
    ensure_tables(engine)
    intake = LogIntake(engine, opts, None, WatchTally())
    done = intake.feed(intake.poll()) + intake.stop()
    intake.close()
    return done


def test_each_request_is_written_as_its_own_session(tmp_path: Path) -> None:
    opts = WatchOptions(log=tmp_path / "s.log", db=str(tmp_path / "l.db"))
    reqs = _requests(opts, "two-slots")
    tally = WatchTally()
    keeper = Keeper(open_db(opts.db, create=True), opts, False, tally)
    kept = [keeper.keep(req, [], fire=False, read_at=0.0) for req in reqs]
    assert [k.session for k in kept] == [r[0] for r in rows(opts.db)]
    assert [r[3] for r in rows(opts.db)] == [req.task.task for req in reqs]
    assert {k.ring_rounds for k in kept} == {None}
    assert (tally.recorded, len(tally.lags)) == (len(reqs), len(reqs))


def test_a_fired_ring_names_the_session_of_the_request_that_fired(tmp_path: Path) -> None:
    """A request may reach the ring after one the log shows later (it waited for its
    answer while another slot's was kept): when it fires, the ring writes both in log
    order, and the session it names is its own, not the last one written."""
    opts = WatchOptions(log=tmp_path / "s.log", db=str(tmp_path / "l.db"), ring=1000)
    first, later = _requests(opts, "edited-history")
    assert first.last_line < later.last_line
    keeper = Keeper(open_db(opts.db, create=True), opts, False, WatchTally())
    held = keeper.keep(later, [], fire=False, read_at=0.0)
    assert (held.session, held.lag, held.ring_rounds) == (None, None, len(later.task.rounds))
    assert rows(opts.db) == []
    fired = keeper.keep(first, [], fire=True, read_at=0.0)
    written = rows(opts.db)
    assert [r[3] for r in written] == [first.task.task, later.task.task]
    assert (fired.session, fired.ring_rounds) == (written[0][0], 0)
