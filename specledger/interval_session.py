"""Store an interval run (adapters/logs/intervals/) as a session: the events go to memory
first, then the session is created with its configuration and the events written unit by
unit (specledger/observed.py), the session `failed` where the run died."""

from adapters.logs.intervals.record import Source, record_run
from adapters.logs.intervals.run import ServerRun
from adapters.protocol import Recording
from specledger.observed import UnitJournal, store_journal


def store_interval_run(db: str, run: ServerRun, src: Source) -> tuple[int, Recording]:
    """Record `run` (read from `src`) as a new session in the log at `db`: its id and what
    was recorded."""
    journal = UnitJournal()
    rec = record_run(run, src, journal)
    return store_journal(db, journal, rec), rec
