"""`specledger bench reading`: how fast `specledger import` reads a big `-v` llama-server log.

The log is one long-lived server run built from a captured `-v` run of our llama.cpp
build (tests' fixture `chain-sampled`: 0.3.36, the shipped target with the ngram-mod,draft-mtp
chain, sampled): its start, then its requests again and again, each copy's task ids after the
last's, then its shutdown; 1 GiB in all (16 MiB quick). Timed as a user runs them, each a
whole process: the reader alone (`python -c` reading the file into its server runs, no
ledger), and `specledger import llama-server LOG` (read, fire the run through the round
machine, store the session in SQLite). Measured: MB/s of log (MB = 10^6 bytes) and the peak
resident memory of each process; the import must record every request. What `watch` reads
at is `specledger bench backlog`'s (a watch catching up on 1 GiB through rotations).
"""

import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.errors import BackendError
from specbench.common import BenchOptions, Goal, SuiteResult, md_table

SUITE = "reading"
COMMAND = "specledger bench reading"
SOURCE = Path(__file__).resolve().parents[1] / "tests" / "adapters" / "llama" / "fixtures" \
    / "chain-sampled.log.gz"
GOAL_MB_S = 20.0
FULL_BYTES, QUICK_BYTES = 2**30, 16 * 2**20
_READ = ("import sys; from adapters.llama.log.sources import read_file; "
         "f = read_file(sys.argv[1]); print(len(f.runs), f.lines)")


@dataclass(frozen=True)
class Timed:
    """One whole process over the log: its wall seconds, MB/s and peak memory."""

    what: str
    seconds: float
    mb_s: float
    peak_mib: float


_TASK = re.compile(rb"(task |id = |id_task = )(\d+)")


def make_log(path: Path, size: int) -> tuple[int, int, int]:
    """Write one server run of `size` bytes to `path`: the captured run's start, its
    requests again and again (each copy's task ids after the last copy's, as one long-lived
    server numbers them), its shutdown; (copies, requests in all, bytes)."""
    run = gzip.decompress(SOURCE.read_bytes())
    start = run.rindex(b"\n", 0, run.index(b"processing task, id = 0")) + 1
    end = run.rindex(b"\n", 0, run.index(b"cleaning up before exit")) + 1
    head, body, tail = run[:start], run[start:end], run[end:]
    requests = body.count(b"| processing task")
    step = 1 + max(int(m.group(2)) for m in _TASK.finditer(body))
    copies = max(1, (size - len(head) - len(tail)) // len(body))
    with path.open("wb") as f:
        f.write(head)
        for k in range(copies):
            f.write(_TASK.sub(lambda m, off=k * step: m.group(1) + str(int(m.group(2)) + off)
                              .encode(), body))
        f.write(tail)
    return copies, copies * requests, path.stat().st_size


def _timed(what: str, argv: list[str], size: int, out: Path) -> tuple[Timed, str]:
    """Run `argv` to its end, its stdout into `out`; its timing and its stdout."""
    start = time.perf_counter()
    with out.open("w") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    if status:
        raise BackendError(f"{what} failed ({status}): {proc.stderr.read()[-500:]}"
                           if proc.stderr else f"{what} failed ({status})")
    return Timed(what, seconds, size / 1e6 / seconds, usage.ru_maxrss / 1024), out.read_text()


def run(opts: BenchOptions) -> SuiteResult:
    """Write the log, time the reader and the import, check every copy was recorded."""
    size = QUICK_BYTES if opts.quick else FULL_BYTES
    with tempfile.TemporaryDirectory(prefix="bench-reading-") as tmp:
        log, db = Path(tmp) / "server.log", Path(tmp) / "reading.db"
        copies, requests, written = make_log(log, size)
        opts.log(f"{SUITE}: {written / 2**20:.0f} MiB: a captured -v run's {requests} "
                 f"requests")
        stdout = Path(tmp) / "stdout"
        reader, out = _timed("reader alone", [sys.executable, "-c", _READ, str(log)], written,
                             stdout)
        runs = int(out.split()[0])
        cli = [sys.executable, "-m", "specledger", "import", "llama-server", str(log),
               "--db", str(db), "--json"]
        imported, out = _timed("specledger import", cli, written, stdout)
        [session] = json.loads(out)["sessions"]
    turns = session["turns"]
    whole = runs == 1 and len(turns) == requests and not session["truncated_tasks"]
    rows = [[t.what, f"{t.seconds:.1f} s", f"{t.mb_s:.1f} MB/s", f"{t.peak_mib:.0f} MiB"]
            for t in (reader, imported)]
    table = md_table(["process", "wall", "rate", "peak memory"], rows) + (
        f"\n\n{written / 2**20:.0f} MiB of `-v` log, one server run: a captured run's "
        f"requests {copies} times, {requests} in all; {len(turns)} turns recorded.")
    goals = [Goal("import of a big -v log", f">= {GOAL_MB_S:.0f} MB/s",
                  f"{imported.mb_s:.1f} MB/s ({written / 2**20:.0f} MiB, every request "
                  f"{'recorded' if whole else 'NOT recorded'})",
                  imported.mb_s >= GOAL_MB_S and whole, COMMAND)]
    data = {"bytes": written, "copies": copies, "requests": requests, "runs": runs,
            "turns": len(turns), "timed": [asdict(t) for t in (reader, imported)]}
    return SuiteResult(SUITE, data, table, goals=goals)
