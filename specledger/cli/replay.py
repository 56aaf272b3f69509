"""`specledger replay SESSION`: the state the log folds to (`--at SEQ`), or the session
run again and compared event by event with its log (`--rerun`, done by runs/rerun.py),
on another backend or with a setting changed (a counterfactual)."""

import argparse
from typing import Any

from specledger.cli.options import (
    RERUN_BACKENDS,
    add_common,
    add_tolerance,
    at_least,
    tolerance_from_args,
)
from specledger.errors import UsageError


def add_parser(sub: Any) -> None:
    """The `replay` command."""
    p = sub.add_parser("replay", help="project a session's state, or re-execute it (--rerun)")
    p.add_argument("session", type=int)
    p.add_argument("--at", type=at_least(int, 0), default=None,
                   help="fold events through this seq (0: before the first)")
    p.add_argument("--rerun", action="store_true",
                   help="run the session again and compare every event with the log")
    p.add_argument("--backend", choices=RERUN_BACKENDS, default=None,
                   help="--rerun on another backend (a counterfactual)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="--rerun with a setting changed (a counterfactual), repeatable")
    add_tolerance(p)
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`specledger replay SESSION [--at SEQ] | --rerun [--backend B] [--set k=v ...]`."""
    if args.rerun:
        if args.at is not None:
            raise UsageError("--at projects the log; it does not combine with --rerun")
        return rerun(args)
    if args.set or args.backend:
        raise UsageError("--set and --backend change a re-execution: add --rerun")
    return project(args)


def project(args: argparse.Namespace) -> int:
    """The slots' state after the log's events through `--at` (all of them without)."""
    from engine.errors import ConfigError
    from eventlog import get_session, open_db
    from eventlog.projection import project_session
    from specledger.views import output

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


def rerun(args: argparse.Namespace) -> int:
    """`--rerun`: 0 when a re-execution reproduced every event (or a counterfactual ran),
    1 at a divergence."""
    from eventlog import get_session, open_db
    from specledger.cli.settings import parse_settings
    from specledger.runs.rerun import recorded_config
    from specledger.runs.rerun import rerun as rerun_session
    from specledger.views import output
    from specledger.views.analysis import (
        divergence_json,
        print_divergence,
        print_turn_deltas,
        turn_deltas_json,
    )

    changes = parse_settings(args.set or [])
    if args.backend is not None:
        changes["backend"] = args.backend
    engine = open_db(args.db, create=False)
    info = get_session(engine, args.session)
    cfg = recorded_config(info).replace(**changes)
    with output.progress_bar(cfg, f"re-running session {args.session}",
                             not args.json) as progress:
        result = rerun_session(args.db, args.session, changes, tolerance_from_args(args),
                               progress)
    mode = "counterfactual" if result.counterfactual else "reexecution"
    if args.json:
        output.emit_json({
            "original": result.original, "session": result.session, "mode": mode,
            "set": result.changes, "tolerance": result.tolerance.to_dict(),
            "compared": result.compared, "reproduced": result.reproduced,
            "divergence": divergence_json(result.divergence),
            "turns": turn_deltas_json(result.turns), "error": result.error})
    else:
        what = (f"session {result.session} re-ran session {result.original}"
                + (f" with {result.changes}" if result.changes else "")
                + f"; {result.compared} events compared")
        print_divergence(result.divergence, what)
        if result.counterfactual:
            print_turn_deltas(result.turns, f"session {result.original}",
                              f"session {result.session}")
        if result.error:
            output.console.print(f"the re-run ended with {result.error}")
    return 0 if result.reproduced or result.counterfactual else 1
