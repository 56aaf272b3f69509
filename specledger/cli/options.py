"""Options and argument types the commands' parsers share. Each command gets its own
copies of the options: argparse shares the actions of a parent parser among its children,
so one child's default would become every child's."""

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.config import OBSERVED, BackendKind
from eventlog import DEFAULT_DB
from specledger.cli.run_flags import checked

if TYPE_CHECKING:
    from eventlog.compare import Tolerance

# The engines a session can be run again on (an observed engine's session re-runs on its
# own server only).
RERUN_BACKENDS = [b.value for b in BackendKind if b not in OBSERVED]


def add_common(p: argparse.ArgumentParser, db_default: str | None = DEFAULT_DB,
               db_help: str = "") -> None:
    """Add `--db` and `--json` to `p`."""
    p.add_argument("--db", default=db_default,
                   help=db_help or f"path or SQLAlchemy URL (default: ./{DEFAULT_DB})")
    p.add_argument("--json", action="store_true", help="print one JSON document")


def at_least(kind: type, lo: float) -> Callable[[str], float]:
    """An argparse type: a number of `kind` no smaller than `lo`."""
    return checked(kind, lambda v: f"{v} must be at least {lo}" if v < lo else "")


def add_tolerance(p: argparse.ArgumentParser) -> None:
    """Add `--tolerance` and `--ignore-digests` (how closely two event streams must agree)."""
    p.add_argument("--tolerance", type=at_least(float, 0), default=0.0,
                   help="relative tolerance for float fields (default 0: exact)")
    p.add_argument("--ignore-digests", action="store_true",
                   help="skip state digests (runs on different devices)")


def tolerance_from_args(args: argparse.Namespace) -> "Tolerance":
    """`--tolerance REL` and `--ignore-digests`."""
    from eventlog.compare import Tolerance

    return Tolerance(rel=args.tolerance, digests=not args.ignore_digests)
