"""`specledger ...`: argument parsing, dispatch, and one-line errors."""

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from sqlalchemy.exc import SQLAlchemyError

from engine.config import OBSERVED, BackendKind
from eventlog.interrupts import interrupts_deferred
from eventlog.unclosed import fail_unclosed
from fsm.errors import SpecledgerError
from specledger import (
    bench_cmd,
    calibrate_cmd,
    commands,
    export_cmd,
    import_cmd,
    llama_cmd,
    migrate_cmd,
)
from specledger.cli_common import add_common
from specledger.errors import ENGINE_MODULES, ExtraMissingError, UsageError
from specledger.graphs import GraphKind
from specledger.run_flags import add_run_flags, checked
from specledger.scenarios import SCENARIOS
from viz import GraphFormat

# The engines a session can be run again on (an observed engine's session re-runs on its
# own server only).
RERUN_BACKENDS = [b.value for b in BackendKind if b not in OBSERVED]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def _at_least(kind: type, lo: float) -> Callable[[str], float]:
    """An argparse type: a number of `kind` no smaller than `lo`."""
    return checked(kind, lambda v: f"{v} must be at least {lo}" if v < lo else "")


def _tolerance_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tolerance", type=_at_least(float, 0), default=0.0,
                   help="relative tolerance for float fields (default 0: exact)")
    p.add_argument("--ignore-digests", action="store_true",
                   help="skip state digests (runs on different devices)")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    p = _Parser(prog="specledger", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="run and record a session")
    add_run_flags(run)
    sub.add_parser("sessions", help="list recorded sessions")
    show = sub.add_parser("show", help="a session's summary and turns")
    show.add_argument("session", type=int)
    replay = sub.add_parser("replay",
                            help="project a session's state, or re-execute it (--rerun)")
    replay.add_argument("session", type=int)
    replay.add_argument("--at", type=_at_least(int, 0), default=None,
                        help="fold events through this seq (0: before the first)")
    replay.add_argument("--rerun", action="store_true",
                        help="run the session again and compare every event with the log")
    replay.add_argument("--backend", choices=RERUN_BACKENDS, default=None,
                        help="--rerun on another backend (a counterfactual)")
    replay.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="--rerun with a setting changed (a counterfactual), repeatable")
    _tolerance_options(replay)
    diff = sub.add_parser("diff",
                          help="first divergent event and per-turn deltas of two sessions")
    diff.add_argument("a", type=int)
    diff.add_argument("b", type=int)
    diff.add_argument("--tokens", action="store_true",
                      help="compare the committed tokens, not every event (the default for "
                           "sessions of different backends)")
    _tolerance_options(diff)
    post = sub.add_parser("postmortem",
                          help="findings from the log; exit 1 on an error-level finding")
    post.add_argument("session", type=int)
    post.add_argument("--reference", type=int, default=None,
                      help="a plain (drafter none) session of the same conversation")
    post.add_argument("--fail-on", choices=["error", "warning"], default="error",
                      help="lowest severity that makes the exit status 1")
    graph = sub.add_parser("graph", help="draw a session's state graph")
    graph.add_argument("sessions", type=int, nargs="*", metavar="SESSION",
                       help="one session; two or more for --kind divergence; none for machine")
    graph.add_argument("--kind", choices=[k.value for k in GraphKind], default="fsm")
    graph.add_argument("--format", choices=[f.value for f in GraphFormat], default="svg")
    graph.add_argument("--out", default=None, help="file to write (default: session-N-KIND.EXT)")
    report = sub.add_parser("report",
                            help="one self-contained HTML file: graphs, metrics, findings")
    report.add_argument("sessions", type=int, nargs="+", metavar="SESSION")
    report.add_argument("--out", default=None, help="file to write (default: report-N.html)")
    scen = sub.add_parser("scenario",
                          help="record a session that reproduces a known bug, and its fix")
    scen.add_argument("name", choices=list(SCENARIOS))
    scen.add_argument("--backend", choices=RERUN_BACKENDS, default="sim")
    scen.add_argument("--seed", type=int, default=1)
    scen.add_argument("--model", default=None, help="torch: target checkpoint directory")
    scen.add_argument("--draft-model", default=None, help="torch: draft checkpoint directory")
    scen.add_argument("--set", action="append", metavar="KEY=VALUE",
                      help="change the scenario's base settings (sizes, drafter), repeatable")
    bench_cmd.add_parser(sub)
    import_cmd.add_parser(sub)
    calibrate_cmd.add_parser(sub)
    export_cmd.add_parser(sub)
    migrate_cmd.add_parser(sub)
    llama_cmd.add_parser(sub)
    demo = sub.add_parser("demo", help="the #28049 amplification, shown")
    demo.add_argument("--out-dir", default="out/demo", help="where the graphs go")
    demo.add_argument("--seed", type=int, default=1)
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
