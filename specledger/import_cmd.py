"""`specledger import llama-server LOGFILE [--responses FILE] [--model GGUF]`: record a
llama-server log as a session that every reading command (show, replay, postmortem,
graph, report) takes like one of ours."""

import argparse
from enum import StrEnum
from pathlib import Path
from typing import Any

from adapters.llama.gguf_export import require_gguf
from adapters.llama.log.reader import read_log
from adapters.llama.provenance import Provenance, file_sha256
from adapters.llama.responses import read_responses
from eventlog import open_db
from specledger import output
from specledger.api import session_turns
from specledger.llama_session import LlamaSession, store_llama_session


class ImportFormat(StrEnum):
    """What `import` reads."""

    LLAMA_SERVER = "llama-server"


def add_parser(sub: Any) -> None:
    """The `import` subcommand."""
    p = sub.add_parser("import", help="record an external engine's log as a session")
    p.add_argument("format", choices=[f.value for f in ImportFormat],
                   help="the log's engine (llama-server: its stdout/stderr, best with -v)")
    p.add_argument("logfile", type=Path, help="the log file (plain or gzip)")
    p.add_argument("--responses", type=Path, default=None,
                   help="the answers the client got (JSON array or JSON Lines of "
                        "completion objects with `timings`): cross-checked with the log")
    p.add_argument("--model", type=Path, default=None,
                   help="the target GGUF the server ran, to record its sha256")


def summary(s: LlamaSession) -> dict[str, Any]:
    """The import's numbers, as `--json` prints them."""
    src = s.config["source"]
    return {"session": s.session_id, "events": s.ledger.events, "turns": len(s.ledger.turns),
            "violations": s.ledger.violations,
            "build": s.config["build"] or s.config["fingerprint"],
            "drafter": s.config["drafter"],
            "lines": {k: src[k] for k in ("lines", "parsed", "skipped", "unknown")},
            "partial_line": src["partial_line"], "gzip_cut": src["gzip_cut"],
            "truncated_tasks": src["truncated_tasks"],
            "responses_matched": s.ledger.responses_matched,
            "provides": s.config["provides"]}


def cmd_import(args: argparse.Namespace) -> int:
    """Read the log (and answers), record the session, print what was imported."""
    model = require_gguf(args.model, "--model") if args.model is not None else None
    reading = read_log(args.logfile)
    responses = read_responses(args.responses) if args.responses is not None else None
    prov = Provenance(log_path=str(args.logfile),
                      responses_path=str(args.responses) if args.responses else None,
                      model_sha256=file_sha256(model) if model is not None else None)
    stored = store_llama_session(args.db, reading, prov, responses=responses)
    doc = summary(stored)
    profiles = session_turns(open_db(args.db, create=False), stored.session_id).profiles
    if args.json:
        output.emit_json({**doc, "turns": output.turn_rows(stored.ledger.turns, profiles)})
        return 0
    lines = doc["lines"]
    output.console.print(
        f"session {stored.session_id}: {args.logfile} ({doc['build'] or 'build not logged'}, "
        f"drafter {doc['drafter'] or 'not logged'}): {doc['turns']} turn(s), "
        f"{doc['events']} events; lines {lines['lines']}: {lines['parsed']} parsed, "
        f"{lines['skipped']} skipped, "
        f"{lines['unknown']} unknown; {doc['violations']} violation(s)")
    for cut in doc["truncated_tasks"]:
        output.console.print(f"  [yellow]truncated[/]: the log ends inside task {cut['task']} "
                             f"(slot {cut['slot']}, line {cut['line']})"
                             + (f": its last round was cut ({cut['restores']} restore(s)), "
                                "nothing of it committed" if cut["dropped_round"] else ""))
    if doc["gzip_cut"] is not None:
        cut = doc["gzip_cut"]
        output.console.print(f"  [yellow]the gzip stream {cut['why']} at byte {cut['at']} of "
                             f"{cut['size']}: {cut['text_bytes']} bytes of text read before "
                             f"it[/]")
    if doc["partial_line"] is not None:
        output.console.print(f"  [yellow]line {doc['partial_line']} was cut mid-write and "
                             f"dropped[/]")
    if args.responses is not None:
        output.console.print(f"  {doc['responses_matched']} answer(s) matched to tasks")
    output.console.print(output.turn_table(stored.ledger.turns, "turns", profiles))
    return 0
