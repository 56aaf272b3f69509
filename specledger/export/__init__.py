"""A recorded session for other tools: Perfetto and Chrome traces of its rounds, and a
Parquet table of its events (`specledger export S --format ...`)."""

import importlib.util
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from fsm.errors import SpecledgerError

if TYPE_CHECKING:
    from sqlalchemy import Engine


class SessionFormat(StrEnum):
    """What a session exports to."""

    PERFETTO = "perfetto"
    CHROME_TRACE = "chrome-trace"
    PARQUET = "parquet"


_NEEDS = {SessionFormat.PERFETTO: "perfetto", SessionFormat.PARQUET: "pyarrow"}


class ExportDependencyError(SpecledgerError):
    """A format's library is not installed."""


@dataclass(frozen=True)
class Exported:
    """What an export wrote: the file, its size, and how many records (trace records, or
    table rows) it holds."""

    path: Path
    bytes: int
    records: int


def export_session(engine: "Engine", session_id: int, fmt: SessionFormat,
                   path: Path) -> Exported:
    """Write session `session_id` to `path` as `fmt`, whole or not at all
    (engine/files.py). Traces read the log twice (the postmortem for the findings'
    instants, then the timeline), Parquet twice as well (its column types, then the rows):
    memory stays flat however long the session is."""
    # Here, not at the top: `SessionFormat` names the CLI's `--format` choices, which must
    # not import the ledger.
    from engine.files import replacing
    from eventlog import get_session
    from eventlog.jsoncodec import encode_json
    from eventlog.postmortem import postmortem_session
    from eventlog.reader import scan_events

    module = _NEEDS.get(fmt)
    if module is not None and importlib.util.find_spec(module) is None:
        raise ExportDependencyError(f"--format {fmt.value} needs {module}, which is not "
                                    "installed: pip install 'specledger[export]'")
    info = get_session(engine, session_id)
    with replacing(path) as tmp:
        if fmt is SessionFormat.PARQUET:
            from specledger.export.parquet_table import write_parquet

            about = {"specledger.session": str(session_id), "specledger.backend": info.backend,
                     "specledger.config": encode_json(info.config)}
            n = write_parquet(lambda: scan_events(engine, session_id), tmp, about)
        else:
            from specledger.export.timeline import timeline

            findings = postmortem_session(engine, session_id).findings
            records = timeline(scan_events(engine, session_id), findings)
            if fmt is SessionFormat.PERFETTO:
                from specledger.export.perfetto_trace import write_perfetto

                n = write_perfetto(records, session_id, tmp)
            else:
                from specledger.export.chrome_trace import write_chrome_trace

                n = write_chrome_trace(records, session_id, tmp)
    return Exported(path, path.stat().st_size, n)
