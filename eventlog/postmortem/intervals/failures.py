"""The failures an interval run's log names (an engine core's fatal error or failed start,
a worker's death, a scheduler's exception), from the run's stored source: each with its
message, the last lines before it, and the requests it was serving."""

from typing import Any

from eventlog.postmortem.advice import CAUSE_ADVICE, Cause
from eventlog.postmortem.detector import Handler
from eventlog.postmortem.finding import Finding, Kind, Severity
from eventlog.series import is_series
from fsm.states import Trigger

_WHAT = {"engine_died": "The engine core died", "worker_died": "A worker process died",
         "startup_failed": "The engine failed to start",
         "scheduler_crash": "The scheduler crashed"}
_SHOWN = 3  # last lines a finding quotes


class EngineFailures:
    """Reads the failures from the session's source; folds nothing."""

    def __init__(self, config: dict[str, Any]) -> None:
        src = config.get("source") or {}
        self.failures: list[dict[str, Any]] = src.get("failures", []) if is_series(config) \
            else []

    def handlers(self) -> dict[Trigger, Handler]:
        """None: the failures are in the stored source."""
        return {}

    def finish(self) -> list[Finding]:
        """One error per failure, in log order."""
        out = []
        for f in self.failures:
            if f["requests"]:
                served = f"it was serving request(s) {', '.join(f['requests'][:5])}"
            elif f["running"] is not None:
                served = (f"{f['running']} request(s) were running at the last stats line "
                          "before it (the log names none)")
            else:
                served = "the log names no request it was serving"
            last = " | ".join(x.strip() for x in f["last_lines"][-_SHOWN:])
            clock = f" ({f['clock']})" if f["clock"] else ""
            out.append(Finding(
                Kind.SERVER_CRASH, Severity.ERROR, 0, 0,
                f"{_WHAT.get(f['kind'], f['kind'])} at log line {f['line']}{clock}: "
                f"{f['message']}; {served}. Its last lines before: {last or '(none)'}",
                CAUSE_ADVICE[Cause.ENGINE_CORE],
                {"failure": f["kind"], "first_line": f["line"], "message": f["message"],
                 "requests": f["requests"], "running": f["running"],
                 "last_lines": f["last_lines"]}))
        return out
