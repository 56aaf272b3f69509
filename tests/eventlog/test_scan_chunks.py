"""A whole-session scan yields the same rows, in log order, whatever its fetch size and
parse chunk (the chunk is a CPU-cache tuning, `eventlog.reader.PARSE_CHUNK`), on every
backend, and no list holds more rows than the chunk."""

import pytest

from engine.config import RunConfig
from eventlog import open_db
from eventlog.reader import scan_rows
from specledger.api import run_session


@pytest.mark.parametrize(("batch", "chunk"), [(7, 3), (3, 7), (2000, 5), (5, 5)])
def test_scan_rows_are_the_same_whatever_the_batch_and_chunk(db_url: str, batch: int,
                                                            chunk: int) -> None:
    sid = run_session(RunConfig(turns=1, answer_tokens=40, seed=1), db_url).session_id
    engine = open_db(db_url, create=False)
    whole = [row for rows in scan_rows(engine, sid, chunk=10**6) for row in rows]
    lists = list(scan_rows(engine, sid, batch=batch, chunk=chunk))
    assert [row for rows in lists for row in rows] == whole
    assert all(0 < len(rows) <= chunk for rows in lists)
    assert [row[0] for row in whole] == sorted(row[0] for row in whole)
