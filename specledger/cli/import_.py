"""`specledger import llama-server LOG... [--responses FILE] [--model GGUF] [--jobs N]`: record
the llama-server logs a user has (files, rotated sets, folders; any line prefix; pieces;
several server runs a file) as sessions that every reading command (show, replay,
postmortem, graph, report) takes like one of ours. `specledger import vllm LOG...` does the
same for the engines whose logs report intervals (specledger/runs/interval_import.py): each
server run an interval session."""

import argparse
import os
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specledger.cli.options import add_common

if TYPE_CHECKING:
    from specledger.runs.imports import SourceImport
    from specledger.runs.interval_import import IntervalReader

_ENDINGS = {"shutdown": "shut down", "died": "[red]died[/] (no shutdown lines)",
            "log_ends": "still running where the log ends"}


class ImportFormat(StrEnum):
    """What `import` reads."""

    LLAMA_SERVER = "llama-server"
    VLLM = "vllm"
    SGLANG = "sglang"


def interval_readers() -> dict[ImportFormat, "IntervalReader"]:
    """The engines whose logs report intervals, each with its reader."""
    from adapters.sglang.log.intervals import read_source as read_sglang
    from adapters.vllm.log.reader import read_source as read_vllm

    return {ImportFormat.VLLM: read_vllm, ImportFormat.SGLANG: read_sglang}


def shipped_logs() -> dict[ImportFormat, Callable[[str], Path]]:
    """Those whose package ships a log (`shipped:NAME`), each with what finds it."""
    from adapters.sglang.log.reader import shipped as shipped_sglang
    from adapters.vllm.log.reader import shipped as shipped_vllm

    return {ImportFormat.VLLM: shipped_vllm, ImportFormat.SGLANG: shipped_sglang}


def add_parser(sub: Any) -> None:
    """The `import` subcommand."""
    p = sub.add_parser("import", help="record an external engine's logs as sessions")
    p.add_argument("format", choices=[f.value for f in ImportFormat],
                   help="the logs' engine (llama-server: its stdout/stderr, best with -v; "
                        "vllm: its OpenAI server's output; sglang: its server's output)")
    p.add_argument("logs", type=Path, nargs="+", metavar="LOG",
                   help="log files (plain or gzip, any line prefix), a rotated set "
                        "(server.log.2.gz server.log.1 server.log: read in order as one), "
                        "or folders of logs")
    p.add_argument("--responses", type=Path, default=None,
                   help="the answers the client got (JSON array or JSON Lines of "
                        "completion objects with `timings`): cross-checked with the log "
                        "(one log of one server run)")
    p.add_argument("--model", type=Path, default=None,
                   help="the target GGUF the server ran, to record its sha256")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="logs read at once (default: one per CPU)")
    add_common(p)
    p.set_defaults(run=run)


def _print_source(done: "SourceImport") -> None:
    """What one source gave: its lines, runs, sessions, cuts and unknown shapes."""
    from specledger.views import output

    con = output.console
    if done.error is not None:
        con.print(f"[red]{done.error}[/]")
        return
    prefix = f", line prefix {done.prefixes[0]!r}" if done.prefixes else ""
    runs = f", {len(done.runs)} server runs" if len(done.runs) > 1 else ""
    con.print(f"{done.name}: {done.lines} lines{prefix}{runs}: {done.parsed} parsed, "
              f"{done.skipped} skipped, {done.unknown} unknown")
    for run in done.runs:
        where = f"run {run.index + 1}, lines {run.first_line}-{run.last_line}"
        if run.session is None:
            con.print(f"  {where}: {run.why_not}, not recorded ({_ENDINGS[run.ending]})")
            continue
        s = run.summary
        con.print(f"  session {run.session}: {where} ({s['build'] or 'build not logged'}, "
                  f"drafter {s['drafter'] or 'not logged'}): {s['turns']} turn(s), "
                  f"{s['events']} events, {s['violations']} violation(s); "
                  f"{_ENDINGS[run.ending]}")
        if s["head_cut_tasks"]:
            con.print(f"    [yellow]the log begins inside task {s['head_cut_tasks'][0]}[/]: "
                      "recorded as a partial turn")
        for cut in s["truncated_tasks"]:
            con.print(f"    [yellow]not whole[/]: task {cut['task']} (slot {cut['slot']}, "
                      f"line {cut['line']}): " + (
                          "the log ends inside it" if cut["why"] == "log_ends" else
                          "its slot takes another task before its end")
                      + (f"; its last round was cut ({cut['restores']} restore(s)), "
                         "nothing of it committed" if cut["dropped_round"] else ""))
        if s["responses_matched"]:
            con.print(f"    {s['responses_matched']} answer(s) matched to tasks")
    if done.gzip_cut is not None:
        cut = done.gzip_cut
        con.print(f"  [yellow]the gzip stream {cut['why']} at byte {cut['at']} of "
                  f"{cut['size']}: {cut['text_bytes']} bytes of text read before it[/]")
    if done.partial_line is not None:
        con.print(f"  [yellow]line {done.partial_line} was cut mid-write and dropped[/]")
    if done.unknown_shapes:
        con.print("  unknown lines, most common shapes first:")
        for shape, n in done.unknown_shapes:
            con.print(f"    {n:6d}  {shape}", markup=False, highlight=False)


def _print_intervals(done: "SourceImport") -> None:
    """What one source of an interval engine gave: its lines, then each run's session."""
    from specledger.views import output

    con = output.console
    if done.error is not None:
        con.print(f"[red]{done.error}[/]")
        return
    prefix = f", line prefix {done.prefixes[0]!r}" if done.prefixes else ""
    con.print(f"{done.name}: {done.lines} lines{prefix}, {len(done.runs)} server run(s): "
              f"{done.parsed} parsed, {done.skipped} skipped, {done.unknown} unknown")
    for run in done.runs:
        where = f"run {run.index + 1}, lines {run.first_line}-{run.last_line}"
        if run.session is None:
            con.print(f"  {where}: {run.why_not}, not recorded ({_ENDINGS[run.ending]})")
            continue
        s = run.summary
        spec = (f"{s['drafter']} k={s['draft_max']}" if s["drafter"] else "not logged")
        con.print(f"  session {run.session}: {where} ({s['engine']} "
                  f"{s['version'] or 'version not logged'}, speculative {spec}): "
                  f"{s['intervals']} interval(s), {s['requests']} request(s), "
                  f"{len(s['failures'])} failure(s); {_ENDINGS[run.ending]}")
    if done.partial_line is not None:
        con.print(f"  [yellow]line {done.partial_line} was cut mid-write and dropped[/]")
    if done.unknown_shapes:
        con.print("  unknown lines, most common shapes first:")
        for shape, n in done.unknown_shapes[:5]:
            con.print(f"    {n:6d}  {shape}", markup=False, highlight=False)


def _import_intervals(args: argparse.Namespace, read: "IntervalReader") -> int:
    """`import vllm`, `import sglang`: each source's runs as interval sessions."""
    from adapters.llama.log.reader import LogFormatError
    from specledger.runs.interval_import import import_paths as import_interval_paths
    from specledger.views import output

    if args.responses is not None or args.model is not None:
        raise LogFormatError(f"--responses and --model go with llama-server logs, not "
                             f"{args.format}")
    explicit = len(args.logs) == 1 and not args.logs[0].is_dir()
    done = []
    shipped = shipped_logs().get(ImportFormat(args.format))
    for d in import_interval_paths(args.db, args.logs, read, shipped):
        if d.error is not None and explicit:
            raise LogFormatError(_with_hint(d.error, args))
        done.append(d)
        if not args.json:
            _print_intervals(d)
    recorded = [r for d in done for r in d.runs if r.session is not None]
    if args.json:
        output.emit_json({"sessions": [r.summary for r in recorded],
                          "files": [d.to_dict() for d in done]})
    if not recorded:
        reasons = "; ".join(d.error or f"{d.name}: no interval, request or failure in "
                            f"its {d.lines} line(s)" for d in done)
        raise LogFormatError(_with_hint(f"nothing recorded: {reasons}", args))
    return 0


def _with_hint(error: str, args: argparse.Namespace) -> str:
    """A one-file import's error, with the command that reads the file when another
    engine's reader knows its lines (a log passed to the wrong `import`)."""
    from specledger.runs.engine_guess import guess_engine

    path = args.logs[0]
    engine = guess_engine(path) if len(args.logs) == 1 and path.is_file() else None
    if engine is None or engine == args.format:
        return error
    return f"{error}; it reads as a {engine} log: specledger import {engine} {path}"


def _with_turns(summary: dict[str, Any], db: str) -> dict[str, Any]:
    """A recorded run's summary with its turns' rows (`--json`)."""
    from eventlog import open_db
    from specledger.api import session_turns
    from specledger.views import output

    turns = session_turns(open_db(db, create=False), summary["session"])
    return {**summary, "turns": output.turn_rows(turns.ended, turns.profiles)}


def run(args: argparse.Namespace) -> int:
    """Read the logs (and answers), record each server run, print what was imported."""
    from adapters.llama.gguf.export import require_gguf
    from adapters.llama.ledger.provenance import file_sha256
    from adapters.llama.ledger.responses import read_responses
    from adapters.llama.log.reader import LogFormatError
    from adapters.llama.log.sources import expand
    from eventlog import open_db
    from specledger.api import session_turns
    from specledger.runs.imports import import_paths, import_source
    from specledger.views import output

    read = interval_readers().get(ImportFormat(args.format))
    if read is not None:
        return _import_intervals(args, read)
    model = require_gguf(args.model, "--model") if args.model is not None else None
    model_sha = file_sha256(model) if model is not None else None
    if args.responses is not None:
        sources = expand(args.logs)
        if len(sources) != 1:
            raise LogFormatError(f"--responses goes with one log, not {len(sources)}: "
                                 "import the others without it")
        done = [import_source(args.db, sources[0], read_responses(args.responses),
                              args.responses, model_sha)]
    else:
        explicit = len(args.logs) == 1 and not args.logs[0].is_dir()
        done = []
        for d in import_paths(args.db, args.logs, max(1, args.jobs), model_sha):
            if d.error is not None and explicit:
                raise LogFormatError(_with_hint(d.error, args))
            done.append(d)
            if not args.json:
                _print_source(d)
    recorded = [r for d in done for r in d.runs if r.session is not None]
    if args.json:
        output.emit_json({"sessions": [_with_turns(r.summary, args.db) for r in recorded],
                          "files": [d.to_dict() for d in done]})
    elif args.responses is not None or len(recorded) == 1:
        if args.responses is not None:
            _print_source(done[0])
        for r in recorded:
            turns = session_turns(open_db(args.db, create=False), r.session)
            output.console.print(output.turn_table(turns.ended, f"session {r.session}",
                                                   turns.profiles))
    if not recorded:
        reasons = "; ".join(d.error or f"{d.name} holds no request: llama-server started "
                            f"({d.lines} line(s)) but logged no task" for d in done)
        raise LogFormatError(_with_hint(f"nothing recorded: {reasons} (pass the log of a "
                                        "server that answered requests)", args))
    return 0
