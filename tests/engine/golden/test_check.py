"""The golden check fails when behaviour changes, and says where: a recorded session's
events, one token id or one trigger changed in memory, are reported at that event, with
the field, the recorded value and the new one (and, for a target's token, its top-two
gap); a changed digest is a float-part difference and no exact-part one."""

import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fsm.event import Event
from fsm.states import Trigger
from tests.engine.golden.check import check_exact, check_floats, check_sim, recorded_events
from tests.engine.golden.grid import grid, torch_grid
from tests.engine.golden.hashes import load, run
from tests.engine.golden.near_tie import ROUNDING, explain, verdict

RECORDED = load()
SIM_CELL = "checkpoint/legacy/synthetic"
TORCH_CELL = "torch/checkpoint/mtp"
TOKEN_LISTS = ("append", "drafts", "targets")


@pytest.fixture(scope="module")
def sim_events() -> list[Event]:
    return run(grid()[SIM_CELL])


@pytest.fixture(scope="module")
def torch_events() -> list[Event]:
    return recorded_events(RECORDED["torch"]["cells"][TORCH_CELL])


def _token_places(events: list[Event]) -> list[tuple[int, str, int]]:
    return [(i, key, j) for i, ev in enumerate(events) for key in TOKEN_LISTS
            for j in range(len(ev.payload.get(key) or []))]


def _with_token(events: list[Event], i: int, key: str, j: int) -> tuple[list[Event], int]:
    """`events` with token j of events[i]'s `key` moved to the next id; (events, new id)."""
    tokens = list(events[i].payload[key])
    tokens[j] += 1
    out = list(events)
    out[i] = replace(events[i], payload={**events[i].payload, key: tokens})
    return out, tokens[j]


def _with_trigger(events: list[Event], i: int) -> tuple[list[Event], Trigger]:
    other = next(t for t in (Trigger.ACCEPT, Trigger.REJECT) if t is not events[i].trigger)
    out = list(events)
    out[i] = replace(events[i], trigger=other)
    return out, other


def test_the_recorded_sessions_pass_their_own_check(sim_events: list[Event],
                                                    torch_events: list[Event]) -> None:
    assert check_sim(RECORDED["sim"][SIM_CELL], sim_events) is None
    recorded = RECORDED["torch"]["cells"][TORCH_CELL]
    assert check_exact(recorded, torch_events) is None
    assert check_floats(recorded, torch_events) is None


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_a_changed_sim_token_or_trigger_is_named(sim_events: list[Event],
                                                 data: st.DataObject) -> None:
    if data.draw(st.booleans(), label="token, not trigger"):
        i, key, j = data.draw(st.sampled_from(_token_places(sim_events)), label="token")
        changed, _ = _with_token(sim_events, i, key, j)
    else:
        i = data.draw(st.integers(0, len(sim_events) - 1), label="event")
        changed, _ = _with_trigger(sim_events, i)
    diff = check_sim(RECORDED["sim"][SIM_CELL], changed)
    assert diff is not None and diff.seq == sim_events[i].seq
    assert diff.trigger == changed[i].trigger.value and diff.actual == changed[i].to_row()
    assert f"seq {diff.seq} ({diff.trigger})" in str(diff)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_a_changed_torch_token_is_named_with_both_ids(torch_events: list[Event],
                                                      data: st.DataObject) -> None:
    i, key, j = data.draw(st.sampled_from(_token_places(torch_events)), label="token")
    changed, new = _with_token(torch_events, i, key, j)
    diff = check_exact(RECORDED["torch"]["cells"][TORCH_CELL], changed)
    assert diff is not None
    assert (diff.seq, diff.trigger, diff.field, diff.expected, diff.actual) == (
        torch_events[i].seq, torch_events[i].trigger.value, f"payload.{key}[{j}]", new - 1,
        new)


def test_a_changed_torch_trigger_and_a_missing_event_are_named(
        torch_events: list[Event]) -> None:
    recorded = RECORDED["torch"]["cells"][TORCH_CELL]
    i = next(i for i, ev in enumerate(torch_events) if ev.trigger is Trigger.REJECT)
    changed, other = _with_trigger(torch_events, i)
    diff = check_exact(recorded, changed)
    assert diff is not None
    assert (diff.seq, diff.field, diff.expected, diff.actual) == (
        torch_events[i].seq, "trigger", "reject", other.value)
    diff = check_exact(recorded, torch_events[:-1])
    assert diff is not None and (diff.field, diff.expected, diff.actual) == (
        "events", len(torch_events), len(torch_events) - 1)


def test_a_changed_digest_is_a_float_difference_only(torch_events: list[Event]) -> None:
    recorded = RECORDED["torch"]["cells"][TORCH_CELL]
    i = next(i for i, ev in enumerate(torch_events) if ev.trigger is Trigger.COMMIT)
    changed = list(torch_events)
    changed[i] = replace(changed[i], payload={**changed[i].payload, "digest": "0" * 16})
    assert check_exact(recorded, changed) is None
    diff = check_floats(recorded, changed)
    assert diff is not None and (diff.seq, diff.trigger, diff.field, diff.actual) == (
        torch_events[i].seq, "commit", "payload.digest", "0" * 16)
    assert diff.expected == torch_events[i].payload["digest"]


def test_a_changed_target_token_comes_with_its_top_two_gap(
        torch_events: list[Event]) -> None:
    i = next(i for i, ev in enumerate(torch_events) if ev.trigger is Trigger.VERIFY)
    changed, _ = _with_token(torch_events, i, "targets", 2)
    diff = check_exact(RECORDED["torch"]["cells"][TORCH_CELL], changed)
    assert diff is not None and diff.field == "payload.targets[2]"
    note = explain(torch_grid()[TORCH_CELL], changed, i, diff.field)
    top = torch_events[i].payload["targets"][2]
    assert note.startswith("the target's top two after ") and f": {top} at " in note
    gap = float(re.search(r", gap ([-+.e\d]+), ", note)[1])
    assert gap > 50 * ROUNDING and note.endswith("behaviour changed")
    assert explain(torch_grid()[TORCH_CELL], changed, i - 1, "payload.drafts[0]").startswith(
        "not a target token")


def test_a_gap_within_rounding_is_called_a_near_tie() -> None:
    assert verdict(ROUNDING).startswith("within reach of rounding: a near-tie")
    assert verdict(100 * ROUNDING).endswith("behaviour changed")
