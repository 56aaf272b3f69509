"""`specledger ...`: argument parsing, dispatch, and one-line errors."""

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from specledger.cli import (
    bench,
    calibrate,
    demo,
    diff,
    export,
    graph,
    import_,
    llama,
    migrate,
    postmortem,
    replay,
    report,
    run,
    scenario,
    sessions,
    show,
    watch,
    whatif,
)

DESCRIPTION = (
    "A flight recorder, replayer and postmortem for speculative decoding on hybrid models "
    "(Gated DeltaNet + attention, such as Qwen3.5). Record a run (our torch engine, "
    "llama.cpp's llama-server, vLLM), import or watch a llama-server log, then list, show, "
    "replay, diff, judge (postmortem) and draw its sessions; bench measures. Sessions go "
    "to a ledger: a SQLite file or a PostgreSQL URL (--db).")
"""What `specledger --help` says the tool is."""

COMMANDS = (run, sessions, show, replay, diff, postmortem, graph, report, scenario, bench,
            import_, calibrate, whatif, export, migrate, llama, watch, demo)
"""Every command's module, in `specledger --help`'s order: its `add_parser` builds the
command's parser, whose `run` default does the work (the only place a command is named)."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: each command's parser is built by its module's `add_parser`,
    which declares its arguments only (what the command runs loads when it runs)."""
    p = _Parser(prog="specledger", description=DESCRIPTION,
                epilog="`specledger COMMAND --help` for one command; docs/usage.md in detail.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def _after_interrupt(exc: KeyboardInterrupt) -> str:
    """Close `failed` the sessions Ctrl-C left open (one created but not yet recorded
    into, say); what could not be closed, and why, as the rest of the one line."""
    from eventlog.interrupts import interrupts_deferred
    from eventlog.unclosed import fail_unclosed

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
        return int(args.run(args))
    except BrokenPipeError:
        raise  # the reader went away: not an error (main)
    except KeyboardInterrupt as exc:
        sys.stderr.write(f"specledger: interrupted{_after_interrupt(exc)}\n")
        return 130
    except Exception as exc:
        interrupt = _interrupt_behind(exc)
        if interrupt is not None:  # a Ctrl-C inside a command's imports, as another error
            sys.stderr.write(f"specledger: interrupted{_after_interrupt(interrupt)}\n")
            return 130
        failure = _failure(args.command, exc, list(argv) if argv is not None else None)
        if failure is None:
            raise  # not the user's to act on: a traceback for the bug report
        line, status = failure
        sys.stderr.write(line + "\n")
        return status


def _interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C an error was raised while handling, if any: a command imports what it
    runs, and an interrupt inside an import may surface as another error (an interrupted
    `__set_name__` becomes a RuntimeError)."""
    chain: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and link not in chain:
        if isinstance(link, KeyboardInterrupt):
            return link
        chain.append(link)
        link = link.__cause__ or link.__context__
    return None


def _failure(command: str, exc: Exception,
             argv: list[str] | None) -> tuple[str, int] | None:
    """The one line and exit status for an error a command raised, the first row whose type
    it is deciding; None where no row applies."""
    # Here, not at the top: the error types load the state machine and SQLAlchemy, which
    # `specledger --help` does not need.
    from sqlalchemy.exc import SQLAlchemyError

    from fsm.errors import INTERNAL_ERRORS, SpecledgerError
    from specledger.cli import bug_report
    from specledger.errors import ENGINE_MODULES, ExtraMissingError, UsageError

    rows: tuple[tuple[type | tuple[type, ...], Callable[[BaseException], str], int], ...] = (
        (UsageError, lambda e: f"specledger {command}: error: {e}", 2),
        # before SpecledgerError: a refused transition is one
        (INTERNAL_ERRORS, lambda e: bug_report.bug_line(command, e, argv),
         bug_report.EXIT_STATUS),
        (SpecledgerError, lambda e: f"specledger: error: {e}", 1),
        (SQLAlchemyError, lambda e: f"specledger: database error: {_first_line(e)}", 1),
        (OSError, lambda e: f"specledger: error: {e}", 1),
    )
    for kind, line, status in rows:
        if isinstance(exc, kind):
            return line(exc), status
    if (isinstance(exc, ModuleNotFoundError)
            and (exc.name or "").split(".")[0] in ENGINE_MODULES):
        return f"specledger: error: {ExtraMissingError(command, exc.name or '')}", 1
    return None


def _first_line(exc: BaseException) -> str:
    """A database error's first line (its message goes on with the SQL and a link)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
