"""One torch thread for these tests: they run many tiny ops, where a second OpenMP thread
only adds synchronisation, and on a busy machine spinning workers made them 10x slower."""

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Run each module of this folder with one intra-op thread, then restore the count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
