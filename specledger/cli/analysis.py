"""The analysis commands: `replay --rerun`, `diff`, `postmortem`, `graph`, `report` and
`scenario`."""

import argparse
from pathlib import Path
from typing import Any

from engine.files import check_target, write_file
from eventlog import get_session, open_db
from eventlog.compare import Tolerance
from eventlog.diff import DiffMode, diff_mode, diff_streams
from eventlog.postmortem import Severity, postmortem_session
from eventlog.reader import scan_events
from eventlog.token_diff import TOKEN_TRIGGERS
from specledger.cli.options import RERUN_BACKENDS, add_tolerance
from specledger.cli.settings import parse_settings
from specledger.runs.rerun import recorded_config, rerun
from specledger.runs.scenarios import SCENARIOS, run_scenario
from specledger.views import output
from specledger.views.analysis import (
    divergence_json,
    print_divergence,
    print_postmortem,
    print_token_diff,
    print_turn_deltas,
    token_diff_json,
    turn_deltas_json,
)
from specledger.views.graphs import GraphKind, default_name, graph_dot
from specledger.views.report import build_report
from specledger.views.token_text import decoders
from viz import GraphFormat, image


def add_parser(sub: Any) -> None:
    """The `diff`, `postmortem`, `graph`, `report` and `scenario` subcommands."""
    diff = sub.add_parser("diff",
                          help="first divergent event and per-turn deltas of two sessions")
    diff.add_argument("a", type=int)
    diff.add_argument("b", type=int)
    diff.add_argument("--tokens", action="store_true",
                      help="compare the committed tokens, not every event (the default for "
                           "sessions of different backends)")
    add_tolerance(diff)
    post = sub.add_parser("postmortem",
                          help="findings from the log; exit 1 on an error-level finding")
    post.add_argument("session", type=int)
    post.add_argument("--reference", type=int, default=None,
                      help="a plain (drafter none) session of the same conversation")
    post.add_argument("--fail-on", choices=["error", "warning"], default="error",
                      help="lowest severity that makes the exit status 1")
    graph = sub.add_parser("graph", help="draw a session's state graph")
    graph.add_argument("sessions", type=int, nargs="*", metavar="SESSION",
                       help="one session; two or more for --kind divergence; none for machine")
    graph.add_argument("--kind", choices=[k.value for k in GraphKind], default="fsm")
    graph.add_argument("--format", choices=[f.value for f in GraphFormat], default="svg")
    graph.add_argument("--out", default=None, help="file to write (default: session-N-KIND.EXT)")
    report = sub.add_parser("report",
                            help="one self-contained HTML file: graphs, metrics, findings")
    report.add_argument("sessions", type=int, nargs="+", metavar="SESSION")
    report.add_argument("--out", default=None, help="file to write (default: report-N.html)")
    scen = sub.add_parser("scenario",
                          help="record a session that reproduces a known bug, and its fix")
    scen.add_argument("name", choices=list(SCENARIOS))
    scen.add_argument("--backend", choices=RERUN_BACKENDS, default="sim")
    scen.add_argument("--seed", type=int, default=1)
    scen.add_argument("--model", default=None, help="torch: target checkpoint directory")
    scen.add_argument("--draft-model", default=None, help="torch: draft checkpoint directory")
    scen.add_argument("--set", action="append", metavar="KEY=VALUE",
                      help="change the scenario's base settings (sizes, drafter), repeatable")


def tolerance_from_args(args: argparse.Namespace) -> Tolerance:
    """`--tolerance REL` and `--ignore-digests`."""
    return Tolerance(rel=args.tolerance, digests=not args.ignore_digests)


def cmd_rerun(args: argparse.Namespace) -> int:
    """`specledger replay S --rerun [--backend B] [--set k=v ...]`: 0 when a re-execution
    reproduced every event (or a counterfactual ran), 1 at a divergence."""
    changes = parse_settings(args.set or [])
    if args.backend is not None:
        changes["backend"] = args.backend
    engine = open_db(args.db, create=False)
    info = get_session(engine, args.session)
    cfg = recorded_config(info).replace(**changes)
    with output.progress_bar(cfg, f"re-running session {args.session}",
                             not args.json) as progress:
        result = rerun(args.db, args.session, changes, tolerance_from_args(args), progress)
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


def cmd_diff(args: argparse.Namespace) -> int:
    """`specledger diff A B [--tokens]`: 0 when identical (timings aside; token by token for
    sessions of different backends or with --tokens), 1 when they differ."""
    engine = open_db(args.db, create=False)
    info_a, info_b = get_session(engine, args.a), get_session(engine, args.b)
    mode = diff_mode(info_a, info_b, args.tokens)
    tol = tolerance_from_args(args)
    only = TOKEN_TRIGGERS if mode is DiffMode.TOKENS else None
    result = diff_streams(scan_events(engine, args.a, triggers=only),
                          scan_events(engine, args.b, triggers=only), tol, mode=mode)
    decode = decoders(info_a, info_b) if result.tokens is not None else (None, None)
    if args.json:
        output.emit_json({
            "a": args.a, "b": args.b, "mode": mode.value,
            "backends": {"a": info_a.backend, "b": info_b.backend},
            "identical": result.identical, "tolerance": tol.to_dict(),
            "compared": result.compared, "divergence": divergence_json(result.divergence),
            "tokens": (token_diff_json(result.tokens, decode)
                       if result.tokens is not None else None),
            "turns": turn_deltas_json(result.turns)})
    else:
        a, b = f"session {args.a}", f"session {args.b}"
        if result.tokens is not None:
            why = ("--tokens" if info_a.backend == info_b.backend
                   else f"backends {info_a.backend} and {info_b.backend}")
            output.console.print(f"compared token by token ({why})")
            print_token_diff(result.tokens, a, b, decode)
        else:
            print_divergence(result.divergence, f"sessions {args.a} and {args.b} agree on "
                                                f"all {result.compared} events")
        print_turn_deltas(result.turns, a, b, prompts=result.tokens is not None)
    return 0 if result.identical else 1


def cmd_postmortem(args: argparse.Namespace) -> int:
    """`specledger postmortem S`: 1 when a finding at the `--fail-on` level exists."""
    pm = postmortem_session(open_db(args.db, create=False), args.session, args.reference)
    if args.json:
        output.emit_json(pm.to_dict())
    else:
        print_postmortem(pm)
    levels = [Severity.ERROR] + ([Severity.WARNING] if args.fail_on == "warning" else [])
    return 1 if any(pm.has(s) for s in levels) else 0


def cmd_graph(args: argparse.Namespace) -> int:
    """`specledger graph S [S ...] --kind fsm|timeline|divergence|machine`."""
    kind, fmt = GraphKind(args.kind), GraphFormat(args.format)
    out = Path(args.out or f"{default_name(kind, args.sessions)}.{fmt.value}")
    check_target(out)
    dot = graph_dot(open_db(args.db, create=False), kind, args.sessions)
    write_file(out, image(dot, fmt))
    if args.json:
        output.emit_json({"session": args.sessions[0] if args.sessions else None,
                          "sessions": args.sessions, "kind": kind.value, "path": str(out)})
    else:
        output.console.print(f"wrote {out}")
    return 0


def cmd_scenario(args: argparse.Namespace) -> int:
    """`specledger scenario NAME`: 0 when the postmortem names the planted bug and the
    fixed counterfactual has no error-level finding."""
    run = run_scenario(args.name, args.db, args.backend, args.seed, args.model,
                       args.draft_model, parse_settings(args.set or []))
    s, fixed = run.scenario, run.fixed
    doc = {
        "scenario": s.name, "backend": run.config.backend.value, "bug": s.bug,
        "expected_finding": s.kind.value, "planted": s.planted, "reference": run.reference,
        "session": run.bug.session, "reproduced": run.reproduced,
        "postmortem": run.bug.to_dict(),
        "counterfactual": {"session": fixed.session, "set": fixed.changes,
                           "branch": divergence_json(fixed.divergence),
                           "postmortem": run.fixed_postmortem.to_dict()},
        "fixed": run.fixed_clean,
    }
    if args.json:
        output.emit_json(doc)
    else:
        output.console.print(f"[bold]scenario {s.name}[/] ({doc['backend']}): {s.bug}")
        output.console.print(f"planted {s.planted} in session {run.bug.session}"
                             + (f" (reference: plain session {run.reference})"
                                if run.reference is not None else ""))
        print_postmortem(run.bug)
        output.console.print(f"\n[bold]counterfactual[/] session {fixed.session} with "
                             f"{fixed.changes}:")
        print_divergence(fixed.divergence, "it behaves exactly like the planted session")
        print_postmortem(run.fixed_postmortem)
        verdict = ("[green]reproduced and fixed[/]" if run.reproduced and run.fixed_clean
                   else "[red]NOT reproduced or not fixed[/]")
        output.console.print(f"\n{verdict}: postmortem names {s.kind.value}: "
                             f"{run.reproduced}; the fix is clean: {run.fixed_clean}")
    return 0 if run.reproduced and run.fixed_clean else 1


def cmd_report(args: argparse.Namespace) -> int:
    """`specledger report S [S ...] --out FILE`: one self-contained HTML file."""
    out = Path(args.out or f"report-{'-'.join(map(str, args.sessions))}.html")
    check_target(out)
    html = build_report(open_db(args.db, create=False), args.sessions)
    write_file(out, html)
    if args.json:
        output.emit_json({"sessions": args.sessions, "path": str(out), "bytes": len(html)})
    else:
        output.console.print(f"wrote {out}")
    return 0
