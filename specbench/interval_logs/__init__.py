"""Suite `interval-logs`: the vLLM (and SGLang) server logs users published, each imported
and read by the postmortem as a user would (`specledger import vllm LOG`, `specledger
postmortem S`), beside what its public thread says happened (threads.py), judged as the
`real-logs` suite judges llama-server's (specbench/real_logs/: the same verdicts, goals and
table). The corpus is ../shared/real-logs/<engine>/ beside the checkout (the
`SPECLEDGER_REAL_LOGS_ROOT` variable names another root). Writes results.json,
interval-logs.md; `--record` also writes docs/interval-logs.md.
"""

import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from adapters.logs.sources import LogSource
from adapters.sglang.log.intervals import read_source as read_sglang
from adapters.vllm.log.reader import read_source as read_vllm
from engine.files import write_file
from eventlog import open_db
from eventlog.postmortem import postmortem_session
from fsm.errors import SpecledgerError
from specbench.common import BenchOptions, SuiteResult
from specbench.interval_logs.threads import THREADS
from specbench.real_logs import LogResult, details, goals, recorded, table
from specledger.runs.interval_import import IntervalReader, import_source

SUITE = "interval-logs"
COMMAND = "specledger bench interval-logs"
DOC = Path(__file__).resolve().parents[2] / "docs" / "interval-logs.md"
LABEL = "vLLM/SGLang logs"
READERS: dict[str, IntervalReader] = {"vllm": read_vllm, "sglang": read_sglang}
"""Each engine's folder of the corpus, with its reader."""


def corpus_root() -> Path:
    """The folder holding the engines' folders of real logs: `SPECLEDGER_REAL_LOGS_ROOT`,
    else ../shared/real-logs beside the checkout."""
    named = os.environ.get("SPECLEDGER_REAL_LOGS_ROOT")
    if named:
        return Path(named)
    return Path(__file__).resolve().parents[3] / "shared" / "real-logs"


def read_log(root: Path, key: str, db: str) -> LogResult:
    """Import one log (`<engine>/<file>`) into `db` and read each session's postmortem."""
    engine, _, name = key.partition("/")
    try:
        done = import_source(db, LogSource((root / engine / name,)), READERS[engine])
    except SpecledgerError as exc:
        return LogResult(key, error=str(exc))
    ledger = open_db(db, create=False)
    findings = [recorded(f.to_dict()) | {"session": s}
                for s in done.sessions for f in postmortem_session(ledger, s).findings]
    return LogResult(key, len(done.runs), done.sessions, done.lines, done.unknown, findings)


def read_corpus(root: Path, db: str) -> list[LogResult]:
    """Every log of THREADS whose engine has a reader, in key order."""
    return [read_log(root, key, db) for key in sorted(THREADS)
            if key.partition("/")[0] in READERS]


def page(results: list[LogResult]) -> str:
    """docs/interval-logs.md: the goals, the table and the quoted findings."""
    intro = ("The vLLM and SGLang server logs users published (the corpus in "
             "`../shared/real-logs/vllm` and `../shared/real-logs/sglang`, each README naming "
             "each log's thread, version, hardware and settings), each imported as interval "
             "sessions (`specledger import vllm`, `specledger import sglang`) and read by the "
             "postmortem, beside what its thread says happened; judged as "
             "[real-logs.md](real-logs.md) judges llama-server's. Written by "
             f"`{COMMAND} --record`; `tests/specbench/test_interval_logs.py` checks this page "
             "against a fresh reading of the corpus.")
    return "\n".join(["# Interval logs: what the threads say, what the postmortem names", "",
                      intro, "", "| goal | target | measured |", "|---|---|---|",
                      *(f"| {g.name} | {g.target} | {g.measured} |"
                        for g in goals(results, THREADS, COMMAND, LABEL)),
                      "", table(results, THREADS), "", "## The findings, quoted", "",
                      details(results, THREADS)]).rstrip() + "\n"


def run(opts: BenchOptions) -> SuiteResult:
    """Read the corpus (into a ledger of its own), write the table and the page."""
    root = corpus_root()
    if not root.is_dir():
        raise SpecledgerError(f"no corpus of real logs at {root} (set "
                              "SPECLEDGER_REAL_LOGS_ROOT to the folder holding vllm/)")
    with tempfile.TemporaryDirectory() as tmp:
        results = read_corpus(root, str(Path(tmp) / "interval-logs.db"))
    text = page(results)
    md = opts.suite_dir(SUITE) / "interval-logs.md"
    write_file(md, text)
    files = [md]
    if opts.record:
        write_file(DOC, text)
        files.append(DOC)
    data = {"corpus": str(root), "logs": [asdict(r) for r in results]}
    return SuiteResult(SUITE, data, table(results, THREADS),
                       goals=goals(results, THREADS, COMMAND, LABEL), files=files)
