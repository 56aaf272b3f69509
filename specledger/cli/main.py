"""`specledger ...`: argument parsing, dispatch, and one-line errors."""

import argparse
import os
import sys
from collections.abc import Sequence

from sqlalchemy.exc import SQLAlchemyError

from eventlog.interrupts import interrupts_deferred
from eventlog.unclosed import fail_unclosed
from fsm.errors import INTERNAL_ERRORS, SpecledgerError
from specledger.cli import bug_report, commands
from specledger.cli.options import add_common
from specledger.errors import ENGINE_MODULES, ExtraMissingError, UsageError

DESCRIPTION = (
    "A flight recorder, replayer and postmortem for speculative decoding on hybrid models "
    "(Gated DeltaNet + attention, such as Qwen3.5). Record a run (our torch engine, "
    "llama.cpp's llama-server, vLLM), import or watch a llama-server log, then list, show, "
    "replay, diff, judge (postmortem) and draw its sessions; bench measures. Sessions go "
    "to a ledger: a SQLite file or a PostgreSQL URL (--db).")
"""What `specledger --help` says the tool is."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: each subcommand's parser is built by its module's
    `add_parser`, in the order `specledger --help` lists them."""
    p = _Parser(prog="specledger", description=DESCRIPTION,
                epilog="`specledger COMMAND --help` for one command; docs/usage.md in detail.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for module in (commands, *commands.SUBCOMMAND_MODULES):
        module.add_parser(sub)
    for name, child in sub.choices.items():
        if name not in ("bench", "llama"):  # bench keeps its sessions beside its results
            add_common(child)
    return p


def _after_interrupt(exc: KeyboardInterrupt) -> str:
    """Close `failed` the sessions Ctrl-C left open (one created but not yet recorded
    into, say); what could not be closed, and why, as the rest of the one line."""
    try:
        with interrupts_deferred():
            problems = fail_unclosed()
    except KeyboardInterrupt:  # pressed again: what was begun is done, stop here
        problems = []
    return "".join(f"; {p}" for p in [*getattr(exc, "__notes__", ()), *problems])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status. A reader that closes the pipe early (`| head`)
    ends the command quietly with status 0, as `git log | head` does."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # now, not at exit, so a closed pipe is caught here
    except BrokenPipeError:
        _discard_stdout()
        return 0


def _discard_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered for the closed pipe goes nowhere,
    so the interpreter's flush at exit cannot fail again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (captured, replaced)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _main(argv: Sequence[str] | None) -> int:
    """Parse and run one command; a closed stdout raises BrokenPipeError."""
    args = build_parser().parse_args(argv)
    try:
        return commands.dispatch(args)
    except UsageError as exc:
        sys.stderr.write(f"specledger {args.command}: error: {exc}\n")
        return 2
    except INTERNAL_ERRORS as exc:  # before SpecledgerError: a refused transition is one
        sys.stderr.write(bug_report.bug_line(args.command, exc,
                                             list(argv) if argv is not None else None) + "\n")
        return bug_report.EXIT_STATUS
    except SpecledgerError as exc:
        sys.stderr.write(f"specledger: error: {exc}\n")
    except SQLAlchemyError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        sys.stderr.write(f"specledger: database error: {first}\n")
    except BrokenPipeError:
        raise  # the reader went away: not an error (main)
    except OSError as exc:
        sys.stderr.write(f"specledger: error: {exc}\n")
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in ENGINE_MODULES:
            raise
        sys.stderr.write(f"specledger: error: {ExtraMissingError(args.command, exc.name or '')}\n")
    except KeyboardInterrupt as exc:
        sys.stderr.write(f"specledger: interrupted{_after_interrupt(exc)}\n")
        return 130
    return 1
