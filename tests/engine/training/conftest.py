"""Shared fixtures: one torch thread for these tests (they run many tiny ops, where a
second OpenMP thread only adds synchronisation, and on a busy machine spinning workers
made them 10x slower), and a freshly initialised tiny model."""

from collections.abc import Iterator

import pytest
import torch

from engine.hybrid import HybridModel
from engine.training.loop import init_weights
from tests.engine.training.tiny import tiny_config


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """Run each module of this folder with one intra-op thread, then restore the count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def model() -> HybridModel:
    """The tiny config's model, initialised as training initialises it (seed 0)."""
    torch.manual_seed(0)
    model = HybridModel(tiny_config())
    init_weights(model)
    return model
