"""`specledger sessions`: the sessions of a ledger, one row each."""

import argparse
from pathlib import Path
from typing import Any

from eventlog import DEFAULT_DB
from specledger.cli.options import add_common


def add_parser(sub: Any) -> None:
    """The `sessions` command."""
    p = sub.add_parser("sessions", help="list recorded sessions")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`specledger sessions`. Before anything is recorded, the default ledger has no
    sessions (a new user's first command); a --db that names no database is an error."""
    from specledger.views import output

    if args.db == DEFAULT_DB and not Path(DEFAULT_DB).exists():
        if args.json:
            output.emit_json([])
        else:
            output.console.print(f"no sessions yet in ./{DEFAULT_DB}: record one with "
                                 "`specledger run`")
        return 0
    from eventlog import list_sessions, open_db
    from eventlog.errors import EmptyLedgerError

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
