"""Import the llama-server logs a user has into a ledger: every server run of every source
(a file, a rotated set read as one stream, each file of a folder) becomes a session of its
own, linked to its file and lines; a run that served no request and did not die is counted,
not recorded. Sources are read in parallel, each by a worker process that stores its runs
itself (SQLite queues its writers; PostgreSQL takes them side by side)."""

from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.llama.ledger.provenance import Provenance
from adapters.llama.ledger.responses import Responses
from adapters.llama.log.reader import LogFormatError, LogReading
from adapters.llama.log.run import RunEnd
from adapters.llama.log.sources import expand, read_source
from adapters.logs.sources import LogSource
from specledger.runs.llama_session import LlamaSession, store_llama_session


@dataclass(frozen=True)
class RunImport:
    """One server run of a source: where it lies, how it ends, and its session (None: not
    recorded, `why_not` says why) with the session's summary."""

    index: int
    first_line: int
    last_line: int
    ending: str
    session: int | None
    why_not: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceImport:
    """One source imported: its name, how its lines were counted, its outer prefixes, the
    most common shapes of its unknown lines, where a last line or gzip stream was cut, and
    its runs; `error` when it could not be read as a llama-server log at all."""

    name: str
    lines: int = 0
    parsed: int = 0
    skipped: int = 0
    unknown: int = 0
    unknown_shapes: list[tuple[str, int]] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    partial_line: int | None = None
    gzip_cut: dict[str, Any] | None = None
    runs: list[RunImport] = field(default_factory=list)
    error: str | None = None

    @property
    def sessions(self) -> list[int]:
        """The sessions recorded from this source, in run order."""
        return [r.session for r in self.runs if r.session is not None]

    def to_dict(self) -> dict[str, Any]:
        """JSON form (`import --json`'s `files`)."""
        return {"file": self.name, "error": self.error,
                "lines": {"lines": self.lines, "parsed": self.parsed,
                          "skipped": self.skipped, "unknown": self.unknown},
                "unknown_shapes": [list(s) for s in self.unknown_shapes],
                "prefixes": self.prefixes, "partial_line": self.partial_line,
                "gzip_cut": self.gzip_cut,
                "runs": [{"run": r.index + 1, "lines": [r.first_line, r.last_line],
                          "ending": r.ending, "session": r.session, "why_not": r.why_not}
                         for r in self.runs]}


def summary(s: LlamaSession) -> dict[str, Any]:
    """A recorded run's numbers, as `import --json` prints them."""
    src = s.config["source"]
    return {"session": s.session_id, "events": s.ledger.events, "turns": len(s.ledger.turns),
            "violations": s.ledger.violations,
            "build": s.config["build"] or s.config["fingerprint"],
            "drafter": s.config["drafter"], "file": src["path"], "run": src["run"],
            "lines": {k: src[k] for k in ("lines", "parsed", "skipped", "unknown")},
            "partial_line": src["partial_line"], "gzip_cut": src["gzip_cut"],
            "truncated_tasks": src["truncated_tasks"],
            "head_cut_tasks": src["head_cut_tasks"],
            "responses_matched": s.ledger.responses_matched,
            "provides": s.config["provides"]}


def _records_anything(run: LogReading) -> bool:
    """Whether a run is worth a session: it served a request, or it died."""
    return run.ending is RunEnd.DIED or any(r.task is not None and r.task >= 0
                                            for r in run.records)


def import_source(db: str, source: LogSource, responses: Responses | None = None,
                  responses_path: Path | None = None, model_sha256: str | None = None,
                  on_session: Callable[[LlamaSession], None] | None = None) -> SourceImport:
    """Read one source and record each of its runs that served a request or died (with
    the client's `responses`, read from `responses_path`, cross-checked); a source that is
    not a llama-server log raises LogFormatError."""
    log = read_source(source)
    runs = []
    for run in log.runs:
        if not _records_anything(run):
            runs.append(RunImport(run.index, run.first_line, run.last_line, run.ending.value,
                                  None, "no request"))
            continue
        prov = Provenance(log_path=source.name, model_sha256=model_sha256,
                          responses_path=str(responses_path) if responses_path else None,
                          runs_in_file=len(log.runs), prefixes=tuple(log.prefixes),
                          parts=tuple(str(p) for p in source.parts)
                          if len(source.parts) > 1 else ())
        stored = store_llama_session(db, run, prov, responses=responses)
        if on_session is not None:
            on_session(stored)
        runs.append(RunImport(run.index, run.first_line, run.last_line, run.ending.value,
                              stored.session_id, None, summary(stored)))
    return SourceImport(source.name, log.lines, log.parsed, log.skipped, log.unknown,
                        log.unknown_shapes(), log.prefixes, log.partial_line,
                        log.gzip_cut.to_dict() if log.gzip_cut is not None else None, runs)


def _import_or_say(db: str, source: LogSource, model_sha256: str | None) -> SourceImport:
    try:
        return import_source(db, source, model_sha256=model_sha256)
    except LogFormatError as exc:
        return SourceImport(source.name, error=str(exc))


def import_paths(db: str, paths: list[Path], jobs: int, model_sha256: str | None = None
                 ) -> Iterator[SourceImport]:
    """Import every source the paths name (files, rotated sets, folders' files), `jobs` at
    a time, yielding each as it is done; a source that is not a llama-server log is
    yielded with its error."""
    sources = expand(paths)
    if jobs <= 1 or len(sources) <= 1:
        for source in sources:
            yield _import_or_say(db, source, model_sha256)
        return
    with ProcessPoolExecutor(max_workers=min(jobs, len(sources))) as pool:
        futures = [pool.submit(_import_or_say, db, s, model_sha256) for s in sources]
        for f in futures:
            yield f.result()
