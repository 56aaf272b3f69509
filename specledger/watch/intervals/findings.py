"""What the watch of an interval log reports: a run's failure (an engine core's death, a
worker's, a crashed scheduler, a failed start) once its lines are read, with the
postmortem's own words (eventlog/postmortem/intervals/failures.py); and when the run
ends, the rest of the run's postmortem (acceptance collapsing, speculation slower than
plain, KV cache exhausted, a prefix cache hitting nothing, counters that disagree). Each as
one line, or as JSON with --json, and to the --on-finding hook."""

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine

from adapters.logs.intervals.run import Failure, ServerRun
from eventlog.postmortem.analyze import postmortem_session
from eventlog.postmortem.finding import Finding, Kind, Severity
from eventlog.postmortem.intervals.failures import EngineFailures
from eventlog.series import SERIES
from specledger.watch.findings import reported


def failure_findings(failures: list[Failure]) -> list[Finding]:
    """The postmortem's finding of each failure."""
    source = {"failures": [f.to_dict() for f in failures]}
    return EngineFailures({"series": SERIES, "source": source}).finish()


def run_findings(engine: Engine, session: int, floor: Severity) -> list[Finding]:
    """The ended run's postmortem findings at least as severe as `floor`, but its
    failures (reported as they were read)."""
    found = postmortem_session(engine, session).findings
    return reported([f for f in found if f.kind is not Kind.SERVER_CRASH], floor)


def run_finding_doc(f: Finding, run: ServerRun, session: int | None,
                    log: str) -> dict[str, Any]:
    """A finding as the watch prints it with --json, and hands it to a hook."""
    line = f.numbers.get("first_line", run.last_line)
    return {"time": datetime.now(UTC).isoformat(timespec="milliseconds"), "log": log,
            "log_line": line, "session": session, "engine": run.engine,
            "run": run.index + 1, "pid": run.pid, **f.to_dict()}


def run_finding_line(doc: dict[str, Any]) -> str:
    """One line: wall time, the engine's run, its session, the kind and what happened."""
    return (f"{doc['time'][11:23]} {doc['engine']} run {doc['run']} (pid {doc['pid']}, "
            f"session {doc['session']}, log line {doc['log_line']}) {doc['severity']} "
            f"{doc['kind']}: {doc['explanation']}")
