"""Import the logs of an engine that reports intervals (vLLM, SGLang) into a ledger: every
server run of every source (a file, a rotated set read as one stream, each file of a folder)
becomes an interval session (specledger/interval_session.py), linked to its file and lines;
a run with no interval, request or failure is counted, not recorded. The engine's reader is
a function from a source to its runs (`IntervalReader`), the one thing that differs per
engine; sources are read one after another (a run is small: one event per interval)."""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from adapters.logs.intervals.record import Source, plain_peer
from adapters.logs.intervals.run import IntervalLog, ServerRun
from adapters.logs.sources import LogSource, SourceError, expand
from adapters.protocol import Recording
from fsm.errors import SpecledgerError
from specledger.interval_session import store_interval_run
from specledger.llama_import import RunImport, SourceImport

IntervalReader = Callable[[LogSource], IntervalLog]
"""An engine's log reader: a source in, its runs out; a source that is not the engine's
log raises a SpecledgerError saying so."""


def summary(sid: int, run: ServerRun, rec: Recording) -> dict[str, Any]:
    """A recorded run's numbers, as `import --json` prints them."""
    src = rec.config["source"]
    return {"session": sid, "events": rec.events, "engine": run.engine,
            "version": run.version, "model": run.model, "drafter": run.method,
            "draft_max": run.num_spec_tokens, "intervals": len(run.intervals),
            "requests": len(run.requests), "failures": src["failures"],
            "file": src["path"], "run": src["run"],
            "lines": {k: src[k] for k in ("lines", "parsed", "skipped", "unknown")}}


def import_source(db: str, source: LogSource, read: IntervalReader) -> SourceImport:
    """Read one source with `read` and record each of its runs that shows anything."""
    log = read(source)
    peers = [(r.index, p) for r in log.runs if (p := plain_peer(r)) is not None]
    runs = []
    for run in log.runs:
        if not run.records_anything:
            runs.append(RunImport(run.index, run.first_line, run.last_line, run.ending.value,
                                  None, "no interval, request or failure"))
            continue
        src = Source(source.name, log.sha256, len(log.runs), tuple(log.prefixes),
                     tuple(str(p) for p in source.parts) if len(source.parts) > 1 else (),
                     tuple(p for i, p in peers if i != run.index))
        sid, rec = store_interval_run(db, run, src)
        runs.append(RunImport(run.index, run.first_line, run.last_line, run.ending.value,
                              sid, None, summary(sid, run, rec)))
    return SourceImport(source.name, log.lines, sum(r.parsed for r in log.runs),
                        sum(r.skipped for r in log.runs), sum(r.unknown for r in log.runs),
                        log.unknown_shapes(), log.prefixes, log.partial_line,
                        log.gzip_cut.to_dict() if log.gzip_cut is not None else None, runs)


def import_paths(db: str, paths: list[Path], read: IntervalReader,
                 shipped: Callable[[str], Path] | None = None) -> Iterator[SourceImport]:
    """Import every source the paths name (`shipped:NAME` a log the engine's package
    carries, which `shipped` finds), yielding each as it is done; a source the reader
    refuses is yielded with its error. A missing path raises SourceError."""
    for source in expand(paths, shipped):
        try:
            yield import_source(db, source, read)
        except (SpecledgerError, SourceError) as exc:
            yield SourceImport(source.name, error=str(exc))
