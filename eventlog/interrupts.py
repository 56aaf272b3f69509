"""Ctrl-C held off while the ledger is written.

Python raises `KeyboardInterrupt` at whatever bytecode the main thread runs when SIGINT
arrives. Landing inside SQLAlchemy, between a statement and its commit or in the middle
of a rollback, it left a connection holding SQLite's write lock: the session's closing
write then waited the whole busy timeout (60 s) on its own lock and failed, leaving the
session `incomplete`; landing after a commit but before the recorder forgot the rows it
had written, it made the closing write store them twice (a stale-writer collision). A
write section runs whole instead: the interrupt is raised where the section ends, with
the database and the writer's own bookkeeping consistent. A section is one transaction
of a few milliseconds, so Ctrl-C still ends a run at once.
"""

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Run the body with SIGINT held: a Ctrl-C that arrives meanwhile is delivered (to the
    handler that was in place) as the body ends, however it ends. Nested sections hold
    it until the outermost ends. Outside the main thread, where Python never delivers
    signals, and under a handler not installed from Python, nothing is held."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is None):
        yield
        return
    held: list[int] = []

    def hold(signum: int, _frame: FrameType | None) -> None:
        held.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            # Delivered now, synchronously: raise_signal runs the restored handler before
            # it returns (the default one raises KeyboardInterrupt here).
            signal.raise_signal(signal.SIGINT)
