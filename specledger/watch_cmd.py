"""`specledger watch --llama-log PATH`: follow a live llama-server log (as `tail -F`),
record every request into the ledger as it completes, print each finding as it is
found; Ctrl-C (or SIGTERM) stops it, and the next watch of the same log resumes there."""

import argparse
import json
import statistics
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import ConfigError
from eventlog.postmortem.finding import Severity
from specledger.cli_common import at_least
from specledger.watch.options import LogEngine
from specledger.watch.prune import parse_duration

if TYPE_CHECKING:
    from specledger.watch.loop import WatchTally


def add_parser(sub: Any) -> None:
    """The `watch` subcommand."""
    p = sub.add_parser("watch", help="follow a live server log (llama-server, vLLM, "
                       "SGLang) into the ledger")
    log = p.add_mutually_exclusive_group(required=True)
    log.add_argument("--llama-log", type=Path, metavar="PATH",
                     help="the log llama-server writes (best with -v --log-timestamps "
                          "--log-prefix); followed through rotation, truncation, restarts")
    for engine in (LogEngine.VLLM, LogEngine.SGLANG):
        log.add_argument(f"--{engine.value}-log", type=Path, metavar="PATH",
                         help=f"the log a {engine.value} server writes: each server run a "
                              "session, its intervals written as they come")
    p.add_argument("--responses-from", type=Path, default=None, metavar="FILE",
                   help="a JSON-lines file the clients append their answers to (completion "
                        "objects with `timings`): each request is recorded with its answer, "
                        "cross-checked as `import --responses` does")
    p.add_argument("--on-finding", default=None, metavar="CMD",
                   help="a shell command run once per finding, the finding as JSON on stdin")
    p.add_argument("--metrics-port", type=at_least(int, 1), default=None, metavar="N",
                   help="serve Prometheus metrics on 127.0.0.1:N/metrics")
    p.add_argument("--keep", type=at_least(int, 1), default=None, metavar="N",
                   help="keep the newest N sessions of this log, prune older ones")
    p.add_argument("--keep-for", default=None, metavar="DURATION",
                   help="prune sessions older than this (30m, 12h, 7d)")
    p.add_argument("--ring", type=at_least(int, 1), default=None, metavar="N",
                   help="flight-recorder mode: hold the last N rounds of each slot in "
                        "memory, write them only when a finding fires")
    p.add_argument("--severity", choices=[Severity.ERROR.value, Severity.WARNING.value],
                   default=Severity.WARNING.value,
                   help="the lowest severity printed, passed to --on-finding and, with "
                        "--ring, written (default: warning)")


def _summary(t: "WatchTally") -> dict[str, Any]:
    lags = sorted(t.lags)
    return {"recorded": t.recorded, "incomplete": t.incomplete, "skipped": t.skipped,
            "ring_dropped": t.ring_dropped, "findings": t.findings, "pruned": t.pruned,
            "switches": t.switches, "resumed_at": t.resumed_at,
            "answered": t.answered, "unanswered": t.unanswered, "gaps": t.gaps,
            "lost_bytes": t.lost_bytes,
            "lag_s": {"median": statistics.median(lags), "max": lags[-1], "of_last": len(lags)}
            if lags else None}


def cmd_watch(args: argparse.Namespace) -> int:
    """Follow until SIGINT/SIGTERM; print findings as they come, a summary at the end."""
    try:  # prometheus_client comes with the llama extra: every other command runs without
        from specledger.watch.loop import WatchOptions, make_watcher, stop_on_signals
    except ModuleNotFoundError as exc:
        if exc.name != "prometheus_client":
            raise
        raise ConfigError("'watch' needs prometheus_client (its metrics): pip install "
                          "'specledger[llama]'") from None
    engine, path = next((e, getattr(args, f"{e.value}_log")) for e in LogEngine
                        if getattr(args, f"{e.value}_log") is not None)
    if engine is not LogEngine.LLAMA and (args.ring or args.responses_from):
        raise ConfigError(f"--ring and --responses-from follow llama-server's requests: "
                          f"--{engine.value}-log takes neither")
    opts = WatchOptions(log=path, db=args.db, engine=engine, on_finding=args.on_finding,
                        metrics_port=args.metrics_port, keep=args.keep,
                        keep_for=parse_duration(args.keep_for) if args.keep_for else None,
                        ring=args.ring, severity=Severity(args.severity),
                        responses=args.responses_from)
    if path.is_dir():
        raise ConfigError(f"--{engine.value}-log {path} is a directory: name the log file")
    if args.responses_from is not None and args.responses_from.is_dir():
        raise ConfigError(f"--responses-from {args.responses_from} is a directory: name "
                          "the file the clients append their answers to")

    def say(line: str) -> None:  # one physical line each, however narrow the terminal
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def emit(doc: dict[str, Any]) -> None:
        say(json.dumps(doc))

    watcher = make_watcher(opts, say, emit if args.json else None)
    if not args.json:
        at = watcher.tally.resumed_at
        say(f"watching {path} into {args.db}"
            + (f", resuming at byte {at}" if at is not None else "")
            + (f", metrics on 127.0.0.1:{args.metrics_port}/metrics"
               if args.metrics_port is not None else "")
            + (f", ring of {args.ring} rounds per slot" if args.ring is not None else "")
            + (f", answers from {args.responses_from}" if args.responses_from else ""))
    stop = threading.Event()
    with stop_on_signals(stop):
        tally = watcher.run(stop)
    doc = _summary(tally)
    if args.json:
        emit({"summary": doc})
    else:
        lag = doc["lag_s"]
        unit = "request(s)" if engine is LogEngine.LLAMA else "server run(s)"
        say(f"stopped: {doc['recorded']} {unit} recorded ({doc['incomplete']} "
            f"incomplete), {doc['skipped']} already recorded, {doc['findings']} finding(s), "
            f"{doc['pruned']} session(s) pruned"
            + (f", {doc['ring_dropped']} held in the ring and dropped" if args.ring else "")
            + (f", {doc['answered']} with their answer, {doc['unanswered']} without"
               if args.responses_from else "")
            + (f", {doc['gaps']} stretch(es) not read ({doc['lost_bytes']} byte(s) known)"
               if doc["gaps"] else "")
            + (f"; lag median {1e3 * lag['median']:.1f} ms, max {1e3 * lag['max']:.1f} ms"
               if lag else ""))
    return 0
