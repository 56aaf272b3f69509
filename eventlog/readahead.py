"""Reading ahead in a thread: the database's work overlaps the fold of what it read before.

SQLite runs a query in C with the interpreter's lock released, so a thread that asks it for
the next few thousand events costs the folding thread almost nothing: on the 1M-event
postmortem the reads (a third of its time) vanish from the wall clock on a second core.
"""

import queue
import threading
from collections.abc import Generator, Iterator
from typing import Any, TypeVar

Item = TypeVar("Item")

_POLL_S = 0.05
"""How often a producer blocked on a full queue looks whether its consumer has gone."""


def read_ahead(items: Generator[Item, None, None], depth: int) -> Iterator[Item]:
    """`items` in order, produced in a thread at most `depth` ahead of the consumer; an
    exception of the producer is raised in the consumer, where the items would have been.

    Closing (or abandoning) the returned iterator stops the producer after its current item
    and waits for it, so whatever the producer reads from (a connection) may be released
    right after."""
    slots: queue.Queue[tuple[bool, Any]] = queue.Queue(depth)
    stop = threading.Event()

    def offer(entry: tuple[bool, Any]) -> bool:
        while not stop.is_set():
            try:
                slots.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not offer((True, item)):
                    return
            offer((False, None))
        except BaseException as exc:  # handed to the consumer, raised there
            offer((False, exc))
        finally:
            items.close()

    worker = threading.Thread(target=produce, name="specledger-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            more, item = slots.get()
            if more:
                yield item
            elif item is None:
                return
            else:
                raise item
    finally:
        stop.set()
        worker.join()
