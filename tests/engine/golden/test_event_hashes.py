"""The events of the golden grid's sessions are those recorded in `event_hashes.json`:
refactors keep behaviour, and a schema change must say so. Sim sessions compare whole on
any machine; torch sessions compare their exact parts (token ids, triggers, counts) on any
machine and their float parts (state digests) only on the machine that recorded them
(hashes.py says why)."""

from functools import cache

import pytest

from fsm.event import Event
from tests.engine.golden.check import Difference, check_exact, check_floats, check_sim
from tests.engine.golden.grid import dropped, grid, torch_grid
from tests.engine.golden.hashes import event_hash, load, run
from tests.engine.golden.near_tie import explain
from tests.engine.golden.parts import machine_key

RECORDED = load()
RERECORD = ("if the change is intended, document it in docs/events.md and re-record with "
            "python -m tests.engine.golden.hashes --write")


def _fail(name: str, diff: Difference) -> str:
    return f"{name}: {diff}\n{RERECORD}"


@pytest.mark.parametrize("name", sorted(grid()))
def test_sim_events_unchanged(name: str) -> None:
    diff = check_sim(RECORDED["sim"][name], run(grid()[name]))
    assert diff is None, (
        f"{_fail(name, diff)}\nthe recorded events there: python -m tests.engine.golden.hashes "
        f"--show {name} --seq {diff.seq} at the commit that recorded the file")


def test_the_golden_file_records_the_grid_and_no_cell_twice() -> None:
    assert sorted(RECORDED["sim"]) == sorted(grid())
    assert sorted(RECORDED["torch"]["cells"]) == sorted(torch_grid())
    sims = [cell["events"] for cell in RECORDED["sim"].values()]
    assert len(set(sims)) == len(sims), "two sim cells pin the same events"
    torches = [repr(cell["events"]) for cell in RECORDED["torch"]["cells"].values()]
    assert len(set(torches)) == len(torches), "two torch cells pin the same events"


@pytest.mark.parametrize("name", sorted(dropped()))
def test_a_dropped_cell_still_repeats_the_one_kept_for_it(name: str) -> None:
    config, kept = dropped()[name]
    assert event_hash(config) == RECORDED["sim"][kept]["events"], (
        f"{name} no longer repeats {kept}: its axis pins something now; put it back in "
        "grid.py and re-record")


def test_the_torch_legacy_cell_keeps_a_token_behind_an_eog() -> None:
    """Its EOG policy pins something: legacy keeps the stray token that truncate cuts."""
    events = RECORDED["torch"]["cells"]["torch/checkpoint/ngram-mod/legacy"]["events"]
    assert any(payload["metrics"]["stray_tokens"]
               for *_, trigger, _, _, payload in events if trigger == "end_turn")


@cache
def _torch_events(name: str) -> list[Event]:
    return run(torch_grid()[name])


@pytest.mark.parametrize("name", sorted(torch_grid()))
def test_torch_exact_part_unchanged(name: str) -> None:
    """Token ids, triggers, states, counts: the same on every machine."""
    events = _torch_events(name)
    diff = check_exact(RECORDED["torch"]["cells"][name], events)
    if diff is not None and diff.seq is not None:
        index = next(i for i, ev in enumerate(events) if ev.seq == diff.seq)
        note = explain(torch_grid()[name], events, index, diff.field)
        diff = Difference(diff.seq, diff.trigger, diff.field, diff.expected, diff.actual, note)
    assert diff is None, _fail(name, diff)


@pytest.mark.parametrize("name", sorted(torch_grid()))
def test_torch_float_part_unchanged_on_the_recording_machine(name: str) -> None:
    """State digests: bits of float tensors, compared only where they were recorded."""
    here, there = machine_key(), RECORDED["torch"]["machine"]
    if here != there:
        pytest.skip(f"float part not compared: recorded on {there}, this is {here} "
                    "(the exact part was)")
    diff = check_floats(RECORDED["torch"]["cells"][name], _torch_events(name))
    assert diff is None, _fail(name, diff)
