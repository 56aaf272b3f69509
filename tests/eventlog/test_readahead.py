"""Reading ahead in a thread: the items in order, the producer's error where the items
would have been, and a consumer that stops early stops the producer."""

import threading
from collections.abc import Generator

import pytest

from eventlog.readahead import read_ahead


def test_the_items_arrive_in_order_whatever_the_depth() -> None:
    for depth in (1, 2, 64):
        assert list(read_ahead((i for i in range(500)), depth)) == list(range(500))


def test_the_producers_error_is_raised_after_its_items() -> None:
    def items() -> Generator[int, None, None]:
        yield 1
        yield 2
        raise ValueError("the database went away")

    got = []
    with pytest.raises(ValueError, match="went away"):
        for item in read_ahead(items(), 4):
            got.append(item)
    assert got == [1, 2]


def test_closing_early_stops_the_producer_and_closes_its_generator() -> None:
    produced, closed = [], threading.Event()

    def items() -> Generator[int, None, None]:
        try:
            for i in range(10**6):
                produced.append(i)
                yield i
        finally:
            closed.set()

    def readers() -> int:
        return sum(t.name == "specledger-read-ahead" for t in threading.enumerate())

    before = readers()
    ahead = read_ahead(items(), 2)
    assert [next(ahead) for _ in range(3)] == [0, 1, 2]
    ahead.close()  # returns only once the producer has stopped
    assert closed.is_set()
    assert len(produced) <= 3 + 2 + 1  # consumed, queued, and the one it was offering
    assert readers() == before  # this one's thread is gone, whatever other tests left
