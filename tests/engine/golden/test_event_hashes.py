"""The events of a fixed grid of sim and torch sessions are exactly those recorded in
`event_hashes.json`: refactors keep behaviour, and a schema change must say so."""

import json

import pytest

from tests.engine.golden.hashes import GOLDEN, event_hash, grid, torch_grid

RECORDED = json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("name", sorted(grid()))
def test_sim_events_unchanged(name: str) -> None:
    assert event_hash(grid()[name]) == RECORDED[name], (
        f"{name}: events changed; if the schema change is intended, document it in "
        "docs/events.md and re-record with python -m tests.engine.golden.hashes --write")


@pytest.mark.parametrize("name", sorted(torch_grid()))
def test_torch_events_unchanged(name: str) -> None:
    assert event_hash(torch_grid()[name], timing=False) == RECORDED[name]
