"""`specledger scenario NAME`: record a session that reproduces a known bug, show that its
postmortem names it, and that the counterfactual with the fix is clean (runs/scenarios.py)."""

import argparse
from typing import Any

from specledger.cli.options import RERUN_BACKENDS, add_common
from specledger.runs.scenarios import SCENARIOS


def add_parser(sub: Any) -> None:
    """The `scenario` command."""
    p = sub.add_parser("scenario", help="record a session that reproduces a known bug, and its fix")
    p.add_argument("name", choices=list(SCENARIOS))
    p.add_argument("--backend", choices=RERUN_BACKENDS, default="sim")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--model", default=None, help="torch: target checkpoint directory")
    p.add_argument("--draft-model", default=None, help="torch: draft checkpoint directory")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="change the scenario's base settings (sizes, drafter), repeatable")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """0 when the postmortem names the planted bug and the fixed counterfactual has no
    error-level finding."""
    from specledger.cli.settings import parse_settings
    from specledger.runs.scenarios import run_scenario
    from specledger.views import output
    from specledger.views.analysis import divergence_json, print_divergence, print_postmortem

    done = run_scenario(args.name, args.db, args.backend, args.seed, args.model,
                        args.draft_model, parse_settings(args.set or []))
    s, fixed = done.scenario, done.fixed
    doc = {
        "scenario": s.name, "backend": done.config.backend.value, "bug": s.bug,
        "expected_finding": s.kind.value, "planted": s.planted, "reference": done.reference,
        "session": done.bug.session, "reproduced": done.reproduced,
        "postmortem": done.bug.to_dict(),
        "counterfactual": {"session": fixed.session, "set": fixed.changes,
                           "branch": divergence_json(fixed.divergence),
                           "postmortem": done.fixed_postmortem.to_dict()},
        "fixed": done.fixed_clean,
    }
    if args.json:
        output.emit_json(doc)
    else:
        output.console.print(f"[bold]scenario {s.name}[/] ({doc['backend']}): {s.bug}")
        output.console.print(f"planted {s.planted} in session {done.bug.session}"
                             + (f" (reference: plain session {done.reference})"
                                if done.reference is not None else ""))
        print_postmortem(done.bug)
        output.console.print(f"\n[bold]counterfactual[/] session {fixed.session} with "
                             f"{fixed.changes}:")
        print_divergence(fixed.divergence, "it behaves exactly like the planted session")
        print_postmortem(done.fixed_postmortem)
        verdict = ("[green]reproduced and fixed[/]" if done.reproduced and done.fixed_clean
                   else "[red]NOT reproduced or not fixed[/]")
        output.console.print(f"\n{verdict}: postmortem names {s.kind.value}: "
                             f"{done.reproduced}; the fix is clean: {done.fixed_clean}")
    return 0 if done.reproduced and done.fixed_clean else 1
