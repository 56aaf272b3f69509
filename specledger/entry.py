"""The `specledger` command's first moment: loading the CLI.

Loading imports the parser, each command's declared arguments (a command's own work loads
when it runs: specledger/cli/main.py). A Ctrl-C then lands inside some import, where
Python may report it as another error with a traceback (an interrupted `__set_name__`
becomes a RuntimeError). Nothing has been read or written yet, so an interrupt while
loading simply ends the process, in the one line an interrupted command prints.
"""

import os
import signal
from collections.abc import Sequence
from types import FrameType

INTERRUPTED = 130
"""The exit status of a command Ctrl-C ended (128 + SIGINT), as the CLI returns it."""


def _interrupted_while_loading(_signum: int, _frame: FrameType | None) -> None:
    os.write(2, b"specledger: interrupted\n")
    os._exit(INTERRUPTED)


def main(argv: Sequence[str] | None = None) -> int:
    """Load the CLI, a Ctrl-C meanwhile ending the process at once, then run it. A SIGINT
    that the caller ignores (a background job of a shell) stays ignored."""
    watch = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if watch:
        signal.signal(signal.SIGINT, _interrupted_while_loading)
    from specledger.cli.main import main as cli_main

    if watch:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return cli_main(argv)
