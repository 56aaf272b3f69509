"""The CLI's commands: each reads its arguments, does its work, prints, returns a status."""

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from adapters.llama.builds.exposed import build_exposure
from engine.config import BackendKind, RunConfig
from engine.errors import ConfigError
from eventlog import DEFAULT_DB, get_session, list_sessions, open_db
from eventlog.errors import EmptyLedgerError
from eventlog.projection import project_session
from eventlog.series import SERIES
from fsm.turn_metrics import TurnMetrics
from specledger import (
    analysis_cmds,
    bench_cmd,
    calibrate_cmd,
    demo,
    export_cmd,
    import_cmd,
    llama_cmd,
    migrate_cmd,
    output,
    watch_cmd,
    whatif_cmd,
)
from specledger.api import run_session, session_turns
from specledger.cli_common import RERUN_BACKENDS, add_tolerance, at_least
from specledger.errors import UsageError
from specledger.run_flags import add_run_flags, config_from_args
from specledger.series_output import show_series

SUBCOMMAND_MODULES = (analysis_cmds, bench_cmd, import_cmd, calibrate_cmd, whatif_cmd,
                      export_cmd, migrate_cmd, llama_cmd, watch_cmd, demo)
"""The modules whose `add_parser` adds the other subcommands, in `specledger --help`'s
order (after this module's own)."""


def add_parser(sub: Any) -> None:
    """The `run`, `sessions`, `show` and `replay` subcommands."""
    run = sub.add_parser("run", help="run and record a session")
    add_run_flags(run)
    sub.add_parser("sessions", help="list recorded sessions")
    show = sub.add_parser("show", help="a session's summary and turns")
    show.add_argument("session", type=int)
    replay = sub.add_parser("replay",
                            help="project a session's state, or re-execute it (--rerun)")
    replay.add_argument("session", type=int)
    replay.add_argument("--at", type=at_least(int, 0), default=None,
                        help="fold events through this seq (0: before the first)")
    replay.add_argument("--rerun", action="store_true",
                        help="run the session again and compare every event with the log")
    replay.add_argument("--backend", choices=RERUN_BACKENDS, default=None,
                        help="--rerun on another backend (a counterfactual)")
    replay.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="--rerun with a setting changed (a counterfactual), repeatable")
    add_tolerance(replay)


def dispatch(args: argparse.Namespace) -> int:
    """Run the command named in `args`."""
    handler: Callable[[argparse.Namespace], int] = {
        "run": cmd_run,
        "sessions": cmd_sessions,
        "show": cmd_show,
        "replay": cmd_replay,
        "diff": analysis_cmds.cmd_diff,
        "postmortem": analysis_cmds.cmd_postmortem,
        "graph": analysis_cmds.cmd_graph,
        "scenario": analysis_cmds.cmd_scenario,
        "report": analysis_cmds.cmd_report,
        "bench": bench_cmd.cmd_bench,
        "import": import_cmd.cmd_import,
        "calibrate": calibrate_cmd.cmd_calibrate,
        "whatif": whatif_cmd.cmd_whatif,
        "export": export_cmd.cmd_export,
        "migrate": migrate_cmd.cmd_migrate,
        "llama": llama_cmd.cmd_llama,
        "watch": watch_cmd.cmd_watch,
        "demo": demo.cmd_demo,
    }[args.command]
    return handler(args)


def cmd_run(args: argparse.Namespace) -> int:
    """`specledger run`."""
    config = config_from_args(args)
    if config.backend is BackendKind.LLAMA:
        from specledger.llama_run import cmd_run_llama

        return cmd_run_llama(config, args.db, args.json)
    if config.backend is BackendKind.VLLM:
        from specledger.vllm_run import cmd_run_vllm

        return cmd_run_vllm(config, args.db, args.json)
    label = f"{config.strategy}/{config.eog_policy}"
    with output.progress_bar(config, label, not args.json) as progress:
        result = run_session(config, args.db, progress=progress)
    profiles = session_turns(open_db(args.db, create=False), result.session_id).profiles
    plain = plain_tps(config, result.turns)
    if args.json:
        doc = {"session": result.session_id, "events": result.events,
               "turns": output.turn_rows(result.turns, profiles)}
        if plain is not None:  # beside the turns, which `show` prints alike
            doc["plain_tps"] = plain
        output.emit_json(doc)
        return 0
    title = (f"session {result.session_id}: {config.backend} {config.strategy} "
             f"eog={config.eog_policy} drafter={config.drafter}")
    if config.slots > 1:
        title += f" slots={config.slots} schedule={config.schedule}"
    output.console.print(output.turn_table(result.turns, title, profiles, plain=plain))
    if plain is not None and any(m.decode_tps < p for m, p in zip(result.turns, plain,
                                                                   strict=True)):
        output.console.print(f"[bold red]speculation loses on {config.profile}[/]: plain "
                             "decoding is faster where the plain tok/s is red")
    output.console.print(f"{result.events} events recorded in {args.db}")
    return 0


def plain_tps(config: RunConfig, turns: Sequence[TurnMetrics]) -> list[float] | None:
    """On the sim, each turn's tokens/s decoded plainly under the session's profile (the
    same answer, one forward per token); None on a measured backend."""
    if config.backend is not BackendKind.SIM:
        return None
    from engine.sim.costs import get_profile

    profile = get_profile(config.profile)
    seconds = [profile.plain_decode_s(m.prompt_tokens, max(0, m.generated_tokens - 1))
               for m in turns]
    return [m.generated_tokens / s if s > 0 else 0.0 for m, s in zip(turns, seconds, strict=True)]


def cmd_sessions(args: argparse.Namespace) -> int:
    """`specledger sessions`. Before anything is recorded, the default ledger has no
    sessions (a new user's first command); a --db that names no database is an error."""
    if args.db == DEFAULT_DB and not Path(DEFAULT_DB).exists():
        if args.json:
            output.emit_json([])
        else:
            output.console.print(f"no sessions yet in ./{DEFAULT_DB}: record one with "
                                 "`specledger run`")
        return 0
    try:
        infos = list_sessions(open_db(args.db, create=False))
    except EmptyLedgerError:  # a ledger being created, or never written to
        infos = []
    if args.json:
        output.emit_json([{"id": s.id, "status": s.status.value, "events": s.events,
                           "backend": s.backend, "created": s.created.isoformat(),
                           "parent": s.parent_id} for s in infos])
    else:
        output.console.print(output.sessions_table(infos))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """`specledger show SESSION`."""
    engine = open_db(args.db, create=False)
    info = get_session(engine, args.session)
    if info.config.get("series") == SERIES:
        return show_series(engine, info, args.json)
    table = session_turns(engine, args.session)
    turns, partial, profiles = table.ended, table.partial, table.profiles
    exposure = build_exposure(info.config)
    if args.json:
        doc = {"session": output.session_json(info),
               "turns": output.turn_rows(turns, profiles),
               "partial_turns": output.turn_rows(partial, profiles)}
        if exposure is not None:
            doc["llama_build"] = exposure.to_dict()
        output.emit_json(doc)
        return 0
    cfg = info.config
    slots = cfg.get("slots") or 1
    # A session recorded before the schedule existed ran its slots one after another.
    shared = f", {slots} slots {cfg.get('schedule', 'sequential')}" if slots > 1 else ""
    output.console.print(
        f"session {info.id}: [bold]{info.status}[/], {info.events} events, backend "
        f"{info.backend}, strategy {cfg.get('strategy')}, eog {cfg.get('eog_policy')}, "
        f"replay {cfg.get('replay_policy')}, drafter {cfg.get('drafter')} "
        f"(k={cfg.get('draft_max')}){shared}, seed {cfg.get('seed')}, "
        f"code {info.code_version}")
    for line in exposure.lines() if exposure is not None else ():
        output.console.print(line, markup=False, highlight=False)
    output.console.print(output.turn_table(turns, "turns", profiles, partial))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """`specledger replay SESSION [--at SEQ]`: the projection of the log; with `--rerun`,
    re-execution."""
    if args.rerun:
        if args.at is not None:
            raise UsageError("--at projects the log; it does not combine with --rerun")
        return analysis_cmds.cmd_rerun(args)
    if args.set or args.backend:
        raise UsageError("--set and --backend change a re-execution: add --rerun")
    engine = open_db(args.db, create=False)
    info = get_session(engine, args.session)
    if args.at is not None and args.at > info.events:
        raise ConfigError(f"--at {args.at}: session {args.session} has {info.events} events "
                          f"(seq 1..{info.events}; 0 is the state before the first)")
    projector = project_session(engine, args.session, args.at)
    last, views = projector.seq, projector.slots
    slots = [{"slot": v.slot, "tokens": v.tokens, "position": v.position,
              "state": v.state.value, "digest": v.digest, "turn": v.turn, "round": v.round,
              "restores": v.restores, "ctx_restores": v.ctx_restores,
              "reprefill_tokens": v.reprefill_tokens, "violations": len(v.violations)}
             for v in views.values()]
    if args.json:
        output.emit_json({"session": args.session, "seq": last, "slots": slots})
        return 0
    output.console.print(f"session {args.session} at seq {last}")
    for s in slots:
        tail = " ".join(str(t) for t in s["tokens"][-8:])
        output.console.print(
            f"  slot {s['slot']}: {s['state']}, turn {s['turn']} round {s['round']}, "
            f"{len(s['tokens'])} tokens, position {s['position']}, digest {s['digest']}, "
            f"{s['violations']} violations; last tokens: {tail}")
    return 0
