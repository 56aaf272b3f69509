"""The postmortem's detectors, run on each request as it is recorded: what they find is
printed at once (one line: time, slot, turn, kind, numbers), stored with the request's
session and handed to the user's `--on-finding` command as JSON on its stdin."""

import json
import subprocess
import sys
import threading
from collections import deque
from datetime import UTC, datetime
from typing import Any

from eventlog.postmortem.analyze import analyze
from eventlog.postmortem.finding import SEVERITY_ORDER, Finding, Severity
from specledger.watch.requests import Request

HOOK_TIMEOUT_S = 30.0
_HOOK_QUEUE = 256  # findings waiting for a slow hook beyond this are dropped


def judge(req: Request) -> list[Finding]:
    """Every detector's findings on the request's events, worst first."""
    findings, _ = analyze(req.journal.events, req.config)
    return findings


def reported(findings: list[Finding], floor: Severity) -> list[Finding]:
    """The findings at least as severe as `floor`: those a watch prints, hands to its hook
    and, in ring mode, writes the ring for (every finding is stored with its session)."""
    return [f for f in findings if SEVERITY_ORDER[f.severity] <= SEVERITY_ORDER[floor]]


def finding_doc(f: Finding, req: Request, session: int | None, log: str) -> dict[str, Any]:
    """A finding as the watch prints it with --json, stores it and hands it to a hook."""
    return {"time": datetime.now(UTC).isoformat(timespec="milliseconds"), "log": log,
            "log_line": req.last_line, "log_t": req.last_t, "session": session,
            "slot": req.task.slot, "turn": req.metrics.turn if req.metrics else None,
            "task": req.task.task, **f.to_dict()}


def finding_line(doc: dict[str, Any]) -> str:
    """One line: wall time, slot, turn (and task), the kind and its numbers."""
    numbers = ", ".join(f"{k}={_short(v)}" for k, v in doc["numbers"].items()
                        if not isinstance(v, (list, dict)))
    return (f"{doc['time'][11:23]} slot {doc['slot']} turn {doc['turn']} (task {doc['task']}, "
            f"session {doc['session']}) {doc['severity']} {doc['kind']}: {numbers}")


def _short(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


class FindingHook:
    """Runs `command` (through the shell) once per finding, the finding as JSON on its
    stdin, on a thread of its own so a slow hook never holds the watch back."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.failed = 0  # runs that failed (each said on stderr)
        self._queue: deque[dict[str, Any]] = deque()
        self._wake = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="on-finding", daemon=True)
        self._thread.start()

    def send(self, doc: dict[str, Any]) -> None:
        """Queue one finding for the command."""
        with self._wake:
            if len(self._queue) >= _HOOK_QUEUE:
                return
            self._queue.append(doc)
            self._wake.notify()

    def close(self, wait_s: float = HOOK_TIMEOUT_S) -> None:
        """Let the queued findings go out (for at most `wait_s`), then stop."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join(wait_s)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._closed:
                    self._wake.wait()
                if not self._queue:
                    return
                doc = self._queue.popleft()
            try:
                done = subprocess.run(self.command, shell=True, input=json.dumps(doc).encode(),
                                      timeout=HOOK_TIMEOUT_S, check=False,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                if done.returncode:
                    why = done.stderr.decode(errors="replace").strip().splitlines()
                    self._fail(f"exit {done.returncode}" + (f": {why[-1]}" if why else ""))
            except (OSError, subprocess.TimeoutExpired) as exc:
                self._fail(str(exc))

    def _fail(self, why: str) -> None:
        self.failed += 1
        sys.stderr.write(f"specledger watch: --on-finding {self.command!r} failed: {why}\n")
