"""Suite `real-logs`: the llama-server logs users published, each imported and read by the
postmortem as a user would (`specledger import llama-server LOG`, `specledger postmortem
S`), beside what its public thread says happened (specbench/real_logs/threads.py).

The logs are the corpus in ../shared/real-logs/llama-server (beside the checkout; the
`SPECLEDGER_REAL_LOGS` variable names another folder). Per log: its server runs, the
sessions recorded, its unknown lines, the findings (every warning and error, and the notes
that name the thread's incident) and the verdict: `named` (a finding names the thread's
incident), `not in the lines` (the thread's incident lies outside the published lines),
`not named`, `clean` (a control with no warning or error), `not clean`, or `a report: not
judged` (a whole log whose notes report performance: they say nothing went wrong, nor
that nothing did). Goals: 80% of
the logs whose thread names an incident get it named; every control clean. Writes
results.json, results.md and real-logs.md; `--record` also writes docs/real-logs.md.
"""

import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from adapters.llama.log.reader import LogFormatError
from adapters.logs.sources import LogSource
from engine.files import write_file
from eventlog import open_db
from eventlog.postmortem import postmortem_session
from specbench.common import BenchOptions, Goal, SuiteResult, md_table
from specbench.real_logs.threads import THREADS, Thread
from specledger.runs.imports import import_source

SUITE = "real-logs"
COMMAND = "specledger bench real-logs"
DOC = Path(__file__).resolve().parents[2] / "docs" / "real-logs.md"
NAMED_GOAL = 0.8


def corpus() -> Path:
    """The folder of real llama-server logs: `SPECLEDGER_REAL_LOGS`, else
    ../shared/real-logs/llama-server beside the checkout."""
    named = os.environ.get("SPECLEDGER_REAL_LOGS")
    if named:
        return Path(named)
    return Path(__file__).resolve().parents[3] / "shared" / "real-logs" / "llama-server"


@dataclass
class LogResult:
    """One log imported and read: its runs, sessions, unknown lines, the findings of
    every session (kind, severity, explanation), and the error that refused it (None)."""

    name: str
    runs: int = 0
    sessions: list[int] = field(default_factory=list)
    lines: int = 0
    unknown: int = 0
    findings: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    def kinds(self, severities: tuple[str, ...] = ("error", "warning", "info")) -> set[str]:
        """The finding kinds of the given severities."""
        return {f["kind"] for f in self.findings if f["severity"] in severities}


_LOG_TAIL = " Its last lines before:"


def recorded(finding: dict[str, Any]) -> dict[str, Any]:
    """A finding as the recorded results keep it: without the lines of the published log it
    quotes (a failure's last lines), which stay in ../shared/real-logs, not in the repository."""
    text = finding["explanation"]
    cut = text.find(_LOG_TAIL)
    numbers = {k: v for k, v in finding.get("numbers", {}).items() if k != "last_lines"}
    return finding | {"numbers": numbers,
                      "explanation": text if cut < 0 else
                      text[:cut] + " Its last lines: in the log."}


def read_log(folder: Path, name: str, db: str) -> LogResult:
    """Import one log of the corpus into `db` and read each session's postmortem."""
    try:
        done = import_source(db, LogSource((folder / name,)))
    except LogFormatError as exc:
        return LogResult(name, error=str(exc))
    engine = open_db(db, create=False)
    findings = [recorded(f.to_dict()) | {"session": s}
                for s in done.sessions for f in postmortem_session(engine, s).findings]
    return LogResult(name, len(done.runs), done.sessions, done.lines, done.unknown, findings)


def read_corpus(folder: Path, db: str) -> list[LogResult]:
    """Every log of THREADS, in name order."""
    return [read_log(folder, name, db) for name in sorted(THREADS)]


def verdict(thread: Thread, result: LogResult) -> str:
    """How the postmortem answers the thread (see the module's docstring)."""
    if thread.incident is None and not _is_control(thread):
        return "a report: not judged"
    if thread.incident is None:
        loud = result.kinds(("error", "warning"))
        return "clean" if not loud and not result.error else "not clean"
    if result.kinds() & set(thread.names):
        return "named"
    return "not named" if thread.visible else "not in the lines"


def _named(results: list[LogResult], threads: dict[str, Thread]
           ) -> list[tuple[Thread, LogResult, str]]:
    return [(threads[r.name], r, verdict(threads[r.name], r)) for r in results]


def goals(results: list[LogResult], threads: dict[str, Thread] = THREADS,
          command: str = COMMAND, label: str = "real logs") -> list[Goal]:
    """Named share of the incident logs, and controls clean (`threads`: what each log's
    thread says; `command`: the suite that measures it; `label` the goals' names begin
    with)."""
    judged = _named(results, threads)
    incidents = [v for t, _, v in judged if t.incident is not None]
    named = sum(v == "named" for v in incidents)
    visible = [v for t, _, v in judged if t.incident is not None and t.visible]
    controls = [v for t, _, v in judged if t.incident is None and _is_control(t)]
    return [
        Goal(f"{label}: thread's incident named", f">= {NAMED_GOAL:.0%} of incident logs",
             f"{named}/{len(incidents)} ({named / len(incidents):.0%}); "
             f"{sum(v == 'named' for v in visible)}/{len(visible)} of those whose lines "
             "show it", named >= NAMED_GOAL * len(incidents), command),
        Goal(f"{label}: controls clean", "no warning or error",
             f"{sum(v == 'clean' for v in controls)}/{len(controls)}",
             all(v == "clean" for v in controls), command),
    ]


def _is_control(thread: Thread) -> bool:
    """A thread that says nothing went wrong (a performance report of a whole log says
    nothing either way)."""
    return "performance report" not in thread.says


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _names(result: LogResult, thread: Thread) -> str:
    shown = sorted({(f["severity"], f["kind"]) for f in result.findings
                    if f["severity"] != "info" or f["kind"] in thread.names})
    if result.error:
        return f"refused: {result.error}"
    return ", ".join(f"{k} ({s})" for s, k in shown) or "nothing"


def table(results: list[LogResult], threads: dict[str, Thread] = THREADS) -> str:
    """The markdown table: per log, what its thread says beside what postmortem names."""
    rows = [[f"`{r.name}`", str(r.runs), str(len(r.sessions)), str(r.unknown),
             _cell(t.says), _names(r, t), f"**{v}**" if v == "named" else v]
            for t, r, v in _named(results, threads)]
    return md_table(["log", "runs", "sessions", "unknown lines", "the thread says",
                     "postmortem names", "verdict"], rows)


def details(results: list[LogResult], threads: dict[str, Thread] = THREADS) -> str:
    """Every warning and error, and each named note, quoted per log."""
    out = []
    for t, r, _ in _named(results, threads):
        shown = [f for f in r.findings if f["severity"] != "info" or f["kind"] in t.names]
        if not shown:
            continue
        out.append(f"### `{r.name}`\n")
        out += [f"- **{f['kind']}** ({f['severity']}): {_cell(f['explanation'])}"
                for f in shown]
        out.append("")
    return "\n".join(out)


def page(results: list[LogResult]) -> str:
    """docs/real-logs.md: the goals, the table and the quoted findings."""
    intro = ("The llama-server logs users published (the corpus in "
             "`../shared/real-logs/llama-server`, its README naming each one's thread, "
             "build, hardware and settings), each imported and read by the postmortem as a "
             "user would, beside what its thread says happened. Written by "
             f"`{COMMAND} --record`; `tests/specbench/test_real_logs.py` checks this page "
             "against a fresh reading of the corpus.")
    return "\n".join(["# Real logs: what the threads say, what the postmortem names", "",
                      intro, "", "| goal | target | measured |", "|---|---|---|",
                      *(f"| {g.name} | {g.target} | {g.measured} |" for g in goals(results)),
                      "", table(results), "", "## The findings, quoted", "",
                      details(results)]).rstrip() + "\n"


def run(opts: BenchOptions) -> SuiteResult:
    """Read the corpus (into a ledger of its own), write the table and the page."""
    folder = corpus()
    if not folder.is_dir():
        raise LogFormatError(f"no corpus of real logs at {folder} (set SPECLEDGER_REAL_LOGS "
                             "to the folder of llama-server logs)")
    with tempfile.TemporaryDirectory() as tmp:
        results = read_corpus(folder, str(Path(tmp) / "real-logs.db"))
    text = page(results)
    md = opts.suite_dir(SUITE) / "real-logs.md"
    write_file(md, text)
    files = [md]
    if opts.record:
        write_file(DOC, text)
        files.append(DOC)
    data = {"corpus": str(folder), "logs": [asdict(r) for r in results]}
    return SuiteResult(SUITE, data, table(results), goals=goals(results), files=files)
