"""One analysis of the scale suite in a process of its own, so that its peak memory is its
own: `python -m specbench.scale.worker DB SESSION projection|postmortem|diff|show`
prints one JSON line: wall and CPU seconds, peak RSS, and what the analysis found."""

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import redirect_stdout
from enum import StrEnum
from pathlib import Path
from typing import Any

from eventlog import open_db
from eventlog.diff import diff_streams
from eventlog.postmortem import postmortem_session
from eventlog.projection import project_session
from eventlog.reader import scan_events


class Analysis(StrEnum):
    """What the worker runs over the whole session."""

    PROJECTION = "projection"
    POSTMORTEM = "postmortem"
    DIFF = "diff"  # the session against itself: two streams at once
    SHOW = "show"  # `specledger show`, its table printed to nowhere


def _command() -> Callable[[Sequence[str]], int]:
    """The CLI's entry point, imported by the one analysis that runs it (its imports are
    not the command's work, nor the other analyses' memory)."""
    from specledger.cli.main import main

    return main


def analyse(db: str, session: int, what: Analysis) -> dict[str, Any]:
    """Run `what` once; its times, peak RSS (MB) and a summary of its result."""
    engine = open_db(db, create=False)
    command = _command() if what is Analysis.SHOW else None
    wall, cpu = time.perf_counter(), time.process_time()
    if what is Analysis.PROJECTION:
        views = project_session(engine, session).slots
        found: Any = {"slots": len(views), "tokens": sum(len(v.tokens) for v in views.values())}
    elif what is Analysis.POSTMORTEM:
        pm = postmortem_session(engine, session)
        found = {"events": pm.events, "findings": {f.kind.value: f.severity.value
                                                   for f in pm.findings}}
    elif command is not None:
        with open(os.devnull, "w") as nowhere, redirect_stdout(nowhere):
            found = {"status": command(["show", str(session), "--db", db])}
    else:
        diff = diff_streams(scan_events(engine, session), scan_events(engine, session))
        found = {"identical": diff.divergence is None, "compared": diff.compared,
                 "turns": len(diff.turns)}
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"analysis": what.value, "wall_s": wall, "cpu_s": cpu, "peak_rss_mb": peak_rss_mb(),
            "found": found}


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM). Not getrusage's ru_maxrss: Linux carries
    that over from the parent across fork and exec, so a child of a large process would
    report the parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    raise OSError("no VmHWM in /proc/self/status: peak memory needs Linux")


if __name__ == "__main__":
    print(json.dumps(analyse(sys.argv[1], int(sys.argv[2]), Analysis(sys.argv[3]))))
