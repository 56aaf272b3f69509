"""A ledger's first writer held inside the transaction that creates its schema, for the
tests of readers that race it."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, event

from eventlog import open_db


@contextmanager
def creation_held(url: str) -> Iterator[None]:
    """Open `url` as its first writer in a thread, held just before it stamps the schema
    version (the tables made, the transaction not committed) for the body of the `with`;
    then let it finish."""
    inside, go_on = threading.Event(), threading.Event()

    def hold_before_the_version(conn: object, cursor: object, statement: str,
                                *args: object) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO META"):
            inside.set()
            go_on.wait(30)

    event.listen(Engine, "before_cursor_execute", hold_before_the_version)
    writer = threading.Thread(target=open_db, args=(url, True))
    try:
        writer.start()
        assert inside.wait(30), "the writer never reached the version row"
        yield
    finally:
        go_on.set()
        writer.join()
        event.remove(Engine, "before_cursor_execute", hold_before_the_version)
