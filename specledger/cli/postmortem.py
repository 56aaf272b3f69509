"""`specledger postmortem SESSION`: the detectors' findings from the log."""

import argparse
from typing import Any

from specledger.cli.options import add_common


def add_parser(sub: Any) -> None:
    """The `postmortem` command."""
    p = sub.add_parser("postmortem", help="findings from the log; exit 1 on an error-level finding")
    p.add_argument("session", type=int)
    p.add_argument("--reference", type=int, default=None,
                   help="a plain (drafter none) session of the same conversation")
    p.add_argument("--fail-on", choices=["error", "warning"], default="error",
                   help="lowest severity that makes the exit status 1")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """1 when a finding at the `--fail-on` level exists."""
    from eventlog import open_db
    from eventlog.postmortem import Severity, postmortem_session
    from specledger.views import output
    from specledger.views.analysis import print_postmortem

    pm = postmortem_session(open_db(args.db, create=False), args.session, args.reference)
    if args.json:
        output.emit_json(pm.to_dict())
    else:
        print_postmortem(pm)
    levels = [Severity.ERROR] + ([Severity.WARNING] if args.fail_on == "warning" else [])
    return 1 if any(pm.has(s) for s in levels) else 0
