"""`specledger migrate --db URL`: upgrade a ledger written by an older specledger."""

import argparse
import sys
from dataclasses import asdict
from typing import Any

from specledger.cli.options import add_common


def add_parser(sub: Any) -> None:
    """The `migrate` subcommand."""
    p = sub.add_parser("migrate", help="upgrade a ledger of an older schema version, in place "
                                   "(one transaction: an interrupted migration changes nothing)")
    add_common(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Migrate `--db`, showing progress on stderr; print what was done."""
    from eventlog.migrate import migrate
    from specledger.views import output

    shown = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if shown:
            sys.stderr.write(f"\rmigrating: {done:,} / {total:,} events")
            sys.stderr.flush()

    result = migrate(args.db, progress)
    if shown and result.events:
        sys.stderr.write("\n")
    if args.json:
        output.emit_json(asdict(result))
    elif result.from_version == result.to_version:
        print(f"{result.ledger} is at schema version {result.to_version}: nothing to do")
    else:
        print(f"{result.ledger}: schema version {result.from_version} -> {result.to_version}, "
              f"{result.events:,} events migrated")
    return 0

