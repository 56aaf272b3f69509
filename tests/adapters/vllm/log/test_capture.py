"""The two readings of one run agree: `specledger import vllm` of the log of our own `run
--backend vllm` session (tools/capture_vllm_logs.py: the server logs its stats every
second) gives the session's acceptance figures, drafted and accepted tokens, as the
session recorded them from vLLM's per-request metrics. tests/tools/test_capture_vllm_logs.py
does the same on a fresh run (needs vLLM)."""

import json
from pathlib import Path

import pytest

from adapters.logs.sources import LogSource
from adapters.vllm.log.reader import read_source
from eventlog import open_db
from eventlog.postmortem import postmortem_session
from eventlog.series import interval_series
from specledger.interval_import import import_source

FIXTURES = Path(__file__).with_name("fixtures")


def imported_acceptance(log: Path, db: str) -> tuple[int, int, int]:
    """(session, drafted, accepted) of the one session `import vllm` records of `log`."""
    done = import_source(db, LogSource((log,)), read_source)
    (sid,) = done.sessions
    points = interval_series(open_db(db, create=False), sid)
    return (sid, sum(p.interval["drafted"] or 0 for p in points),
            sum(p.interval["accepted"] or 0 for p in points))


@pytest.mark.parametrize("name", ["default", "debug"])
def test_the_import_gives_the_sessions_acceptance(name: str, tmp_path: Path) -> None:
    recorded = json.loads((FIXTURES / f"{name}.session.json").read_text())
    db = f"sqlite:///{tmp_path / 'l.db'}"
    sid, drafted, accepted = imported_acceptance(FIXTURES / f"{name}.log.gz", db)
    assert (drafted, accepted) == (recorded["drafted"], recorded["accepted"])
    # A healthy run of ours: nothing to warn of.
    findings = postmortem_session(open_db(db, create=False), sid).findings
    assert [f.kind.value for f in findings if f.severity.value != "info"] == []
