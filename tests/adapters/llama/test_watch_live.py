"""`specledger watch` on a real llama-server under load (`-np 2`, two concurrent `openai`
clients, an edited history that makes the server prefill again), through one log
rotation and one restart in place: every request the clients were answered is in the
ledger exactly once, findings are printed while the run goes on, and the metrics
endpoint's counters equal the ledger's. `specledger bench watch` runs it for longer and
measures the lag and the overhead."""

import os
import time
from collections import Counter
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from adapters.process import free_port
from eventlog import open_db
from fsm.errors import SpecledgerError
from specbench.watch.load import (
    Phase,
    Served,
    drive,
    llama_server,
    scrape,
    start_watch,
    wait_recorded,
)
from specledger.api import session_turns
from tests.adapters.llama.conftest import Ggufs
from tests.specledger.watch.helpers import rows

PHASE_S = 8.0  # seconds of driving per server: three servers, well under a minute in all
THINK_S = 0.2  # each client reads an answer this long before it asks again


def _recorded(db: str) -> int:
    """Requests in the ledger so far (none before the watch created it)."""
    try:
        return len(rows(db))
    except (SpecledgerError, SQLAlchemyError):
        return 0


def test_watch_records_every_request_of_a_loaded_server_once(
        llama_server_binary: Path, ggufs: Ggufs, tmp_path: Path) -> None:
    log, db, mport = tmp_path / "server.log", str(tmp_path / "ledger.db"), free_port()
    phases: list[Phase] = []
    servers: list[Served] = []

    def phase(server: Served) -> None:
        servers.append(server)
        phases.append(drive(server.port, clients=2, seconds=PHASE_S, think_s=THINK_S))
        # A restart in place truncates the log: the watch must have read it first.
        wait_recorded(lambda: _recorded(db), sum(len(p.answered) for p in phases))

    log.touch()  # the watch follows it from the start; the first server writes into it
    with start_watch(log, db, "--metrics-port", str(mport)) as watch:
        with llama_server(llama_server_binary, ggufs.target, log) as server:
            phase(server)
            log.rename(tmp_path / "server.log.1")  # rotated; the server writes the old file
        with llama_server(llama_server_binary, ggufs.target, log) as server:  # a new file
            phase(server)
        with llama_server(llama_server_binary, ggufs.target, log) as server:  # O_TRUNC
            phase(server)
            ended = time.time()
            metrics = scrape(mport)
        summary = watch.stop()
    answered = [a for p in phases for a in p.answered]

    engine = open_db(db, create=False)
    recorded = rows(db)
    assert {status for _, status, *_ in recorded} == {"finished"}
    turns = [session_turns(engine, sid).ended[0] for sid, *_ in recorded]
    assert Counter((t.prompt_tokens, t.generated_tokens) for t in turns) == Counter(
        (a.prompt_tokens, a.completion_tokens) for a in answered)
    assert summary["switches"] == ["rotated", "rewritten"] or summary["switches"] == [
        "rotated", "truncated"]

    findings = watch.findings
    reprefills = [(t, d) for t, d in findings if d["kind"] == "history_reprefill"]
    assert reprefills, "no edited history was prefilled again"
    assert all(t < ended for t, _ in findings)  # printed while the clients were running
    # From the line that proves it (its server's start plus the line's own time) to the
    # finding printed; `bench watch` holds these to its 1 s goal, over a longer run.
    latencies = [t - max((s for s in servers if s.started_at <= t),
                         key=lambda s: s.started_at).wall(d["log_t"]) for t, d in findings]
    print(f"{len(findings)} finding(s), latency from the log line: max "
          f"{max(latencies):.3f} s; reading-to-ledger lag median "
          f"{summary['lag_s']['median']:.3f} s")

    def total(name: str, **labels: str) -> float:
        key = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        return metrics.get(f"{name}{{{key}}}" if key else name, 0.0)

    assert total("specledger_watch_requests_total", status="finished") == len(recorded)
    assert total("specledger_watch_rounds_total") == sum(t.rounds for t in turns)
    assert total("specledger_watch_drafted_tokens_total", drafter="draft-mtp") == sum(
        t.drafted for t in turns)
    assert total("specledger_watch_accepted_tokens_total", drafter="draft-mtp") == sum(
        t.accepted for t in turns)
    assert total("specledger_watch_reprefilled_tokens_total") == sum(
        t.reprefill_tokens for t in turns)
    assert total("specledger_watch_findings_total", kind="history_reprefill",
                 severity="warning") == len(reprefills)
    assert os.path.getsize(tmp_path / "server.log.1") > 0
