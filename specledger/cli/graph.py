"""`specledger graph SESSION... --kind fsm|timeline|divergence|machine`: a session's state
graph drawn to a file."""

import argparse
from pathlib import Path
from typing import Any

from specledger.cli.options import add_common
from specledger.views.graphs import GraphKind
from viz.formats import GraphFormat


def add_parser(sub: Any) -> None:
    """The `graph` command."""
    p = sub.add_parser("graph", help="draw a session's state graph")
    p.add_argument("sessions", type=int, nargs="*", metavar="SESSION",
                   help="one session; two or more for --kind divergence; none for machine")
    p.add_argument("--kind", choices=[k.value for k in GraphKind], default="fsm")
    p.add_argument("--format", choices=[f.value for f in GraphFormat], default="svg")
    p.add_argument("--out", default=None, help="file to write (default: session-N-KIND.EXT)")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Draw the graph `--kind` names into `--out`."""
    from engine.files import check_target, write_file
    from eventlog import open_db
    from specledger.views import output
    from specledger.views.graphs import default_name, graph_dot
    from viz.render import image

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
