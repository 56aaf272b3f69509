"""The pure round math: acceptance, EOG policies, prefix reuse planning."""

from hypothesis import given
from hypothesis import strategies as st

from engine.config import EogPolicy
from engine.slot import CtxCheckpoint, plan_reuse
from engine.speculative import accepted_block, common_prefix, count_accepted, visible_answer

EOG = 99
tokens = st.lists(st.integers(0, 5) | st.just(EOG), min_size=1, max_size=12)


@given(tokens, tokens)
def test_count_accepted_is_the_matching_prefix(drafts: list[int], targets: list[int]) -> None:
    j = count_accepted(drafts, targets)
    assert drafts[:j] == targets[:j]
    assert j == min(len(drafts), len(targets)) or drafts[j] != targets[j]


@given(tokens, st.data())
def test_truncate_never_commits_past_eog_and_legacy_keeps_everything(
    drafts: list[int], data: st.DataObject
) -> None:
    targets = data.draw(st.lists(st.integers(0, 5) | st.just(EOG),
                                 min_size=len(drafts) + 1, max_size=len(drafts) + 1))
    legacy = accepted_block(drafts, targets, {EOG}, EogPolicy.LEGACY)
    trunc = accepted_block(drafts, targets, {EOG}, EogPolicy.TRUNCATE)
    j = count_accepted(drafts, targets)
    assert legacy.tokens == [*drafts[:j], targets[j]]
    assert trunc.tokens == visible_answer(legacy.tokens, {EOG})
    assert EOG not in trunc.tokens[:-1]
    assert trunc.cut == len(legacy.tokens) - len(trunc.tokens)
    assert trunc.consumed == len(trunc.tokens) >= 1


@given(st.lists(st.integers(0, 3), max_size=30), st.lists(st.integers(0, 3), max_size=30))
def test_common_prefix(a: list[int], b: list[int]) -> None:
    n = common_prefix(a, b)
    assert a[:n] == b[:n]
    assert n == min(len(a), len(b)) or a[n] != b[n]


def test_reuse_plan_keeps_live_state_when_it_consumed_only_the_common_prefix() -> None:
    slot = [1, 2, 3, 4, 9]  # position 4: the last token committed, not consumed
    plan = plan_reuse(slot, 4, [], [1, 2, 3, 4, 9, 7, 7])
    assert (plan.kept, plan.start, plan.restore, plan.reset, plan.reprefill) == (
        5, 4, None, False, 0)


def test_reuse_plan_falls_back_to_newest_usable_checkpoint() -> None:
    slot = [1, 2, 3, 4, 9, 5, 5]  # two stray tokens behind EOG 9, position 6
    ring = [CtxCheckpoint(1, "a"), CtxCheckpoint(2, "b"), CtxCheckpoint(6, "c")]
    plan = plan_reuse(slot, 6, ring, [1, 2, 3, 4, 9, 0, 0])
    assert plan.restore == ring[1]
    assert plan.reprefill == 5 - 2 and plan.start == 2


def test_reuse_plan_reprefills_everything_without_checkpoint() -> None:
    plan = plan_reuse([1, 2, 3, 8, 8], 4, [], [1, 2, 3, 0])
    assert plan.reset and plan.start == 0 and plan.reprefill == 3
