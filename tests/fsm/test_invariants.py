"""Invariant checks over plain facts."""

from hypothesis import given
from hypothesis import strategies as st

from fsm.invariants import (
    Audit,
    CommitFacts,
    Invariant,
    ProgressGuard,
    check_commit,
    check_turn_end,
)


def _facts(**kw: object) -> CommitFacts:
    base = dict(committed=2, n_tokens=10, position=9, kv_len=9, digest="a",
                audit=Audit(True, "a"), ctx_positions=(4,))
    base.update(kw)
    return CommitFacts(**base)  # type: ignore[arg-type]


def test_clean_commit_has_no_violation() -> None:
    assert check_commit(_facts()) == []


def test_each_broken_fact_names_its_invariant() -> None:
    cases = {
        Invariant.FORWARD_PROGRESS: _facts(committed=0),
        Invariant.STATE_TRUTH: _facts(audit=Audit(False, "b", 1.0)),
        Invariant.BOOKKEEPING: _facts(kv_len=8),
        Invariant.DRAFT_STATE: _facts(draft_position=3, draft_expected_position=4),
    }
    for invariant, facts in cases.items():
        assert [v.invariant for v in check_commit(facts)] == [invariant]
    beyond = check_commit(_facts(ctx_positions=(4, 11)))
    assert [v.invariant for v in beyond] == [Invariant.BOOKKEEPING]


@given(st.lists(st.integers(0, 50), max_size=20), st.lists(st.integers(0, 50), max_size=5))
def test_turn_end_flags_exactly_the_stray_tokens(transcript: list[int], stray: list[int]) -> None:
    violations = check_turn_end(transcript + stray, transcript)
    if not stray:
        assert violations == []
    else:
        (v,) = violations
        assert v.invariant is Invariant.SLOT_PREFIX and v.details["stray"] == stray


def test_progress_guard_trips_on_repeated_restores_at_one_position() -> None:
    g = ProgressGuard(limit=2)
    assert not g.note_restore(7)
    assert g.note_restore(7)
    g.note_progress()
    assert not g.note_restore(7)
    assert not g.note_restore(8)
    off = ProgressGuard(limit=0)
    assert not any(off.note_restore(3) for _ in range(100))
