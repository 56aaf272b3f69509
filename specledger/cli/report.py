"""`specledger report SESSION... [--out FILE]`: one self-contained HTML file of graphs,
metrics and findings (views/report.py)."""

import argparse
from pathlib import Path
from typing import Any

from specledger.cli.options import add_common


def add_parser(sub: Any) -> None:
    """The `report` command."""
    p = sub.add_parser("report", help="one self-contained HTML file: graphs, metrics, findings")
    p.add_argument("sessions", type=int, nargs="+", metavar="SESSION")
    p.add_argument("--out", default=None, help="file to write (default: report-N.html)")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Write the report to `--out`."""
    from engine.files import check_target, write_file
    from eventlog import open_db
    from specledger.views import output
    from specledger.views.report import build_report

    out = Path(args.out or f"report-{'-'.join(map(str, args.sessions))}.html")
    check_target(out)
    html = build_report(open_db(args.db, create=False), args.sessions)
    write_file(out, html)
    if args.json:
        output.emit_json({"sessions": args.sessions, "path": str(out), "bytes": len(html)})
    else:
        output.console.print(f"wrote {out}")
    return 0
