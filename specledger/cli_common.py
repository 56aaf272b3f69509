"""Options every subcommand takes. Each subcommand gets its own copies of them: argparse
shares the actions of a parent parser among its children, so one child's default would
become every child's."""

import argparse

from eventlog import DEFAULT_DB


def add_common(p: argparse.ArgumentParser, db_default: str | None = DEFAULT_DB,
               db_help: str = "") -> None:
    """Add `--db` and `--json` to `p`."""
    p.add_argument("--db", default=db_default,
                   help=db_help or f"path or SQLAlchemy URL (default: ./{DEFAULT_DB})")
    p.add_argument("--json", action="store_true", help="print one JSON document")
