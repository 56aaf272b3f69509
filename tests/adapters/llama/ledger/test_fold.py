"""Folding captured logs into tasks and rounds: the fold adds up to llama-server's own
per-task totals, interleaved slots stay apart, and a log cut mid-round loses exactly that
round, reported."""


import pytest

from adapters.llama.ledger.crosscheck import totals_violations
from adapters.llama.ledger.fold import fold_tasks
from adapters.llama.ledger.rounds import accepted_drafts
from adapters.llama.ledger.tasks import LlamaTask
from adapters.llama.log.reader import parse_log
from adapters.llama.log.records import AccPerPos, DraftTotals, RecordKind
from adapters.llama.log.sources import read_log
from fsm.draft_profile import DraftProfile
from tests.adapters.llama.log.test_reader import FIXTURES, fixture_text

VERBOSE = ("mtp", "ngram-mod", "draft-simple", "two-slots", "chain-sampled")


def round_fold(task: LlamaTask) -> DraftProfile:
    """The (drafted, accepted) fold of a task's speculative rounds."""
    return DraftProfile([(r.drafted, accepted_drafts(r)) for r in task.rounds
                         if r.speculative])


@pytest.mark.parametrize("name", VERBOSE)
def test_rounds_add_up_to_the_engines_totals(name: str) -> None:
    fold = fold_tasks(read_log(FIXTURES / f"{name}.log.gz").records)
    assert fold.tasks and not fold.truncated and not fold.orphans
    for task in fold.tasks:
        assert task.released is not None and task.totals is not None
        f = round_fold(task)
        assert (f.drafted, f.accepted) == (task.totals.generated, task.totals.accepted)
        assert abs((f.mean_accept_len or 1.0) - task.totals.mean_len) <= 0.005 + 1e-9
        assert all(r.complete for r in task.rounds)
        # The slot's length at release: the prompt and every token but the last sampled.
        assert task.released.n_tokens == task.prompt_tokens + task.generated - 1


def test_replays_follow_speculative_checkpoint_restores() -> None:
    fold = fold_tasks(read_log(FIXTURES / "ngram-mod.log.gz").records)
    restored = [r for t in fold.tasks for r in t.rounds if r.restores]
    assert restored
    for r in restored:
        assert len(r.replays) == len(r.restores) and r.spec_ckpt is not None
        # The replay verifies the accepted drafts and the target's correction again.
        assert r.kept is not None and r.kept.ids == r.replays[-1] + 1


def test_model_drafters_name_their_draft_ids() -> None:
    for name in ("mtp", "draft-simple"):
        fold = fold_tasks(read_log(FIXTURES / f"{name}.log.gz").records)
        spec = [r for t in fold.tasks for r in t.rounds if r.speculative]
        assert spec and all(len(r.draft_ids) == r.drafted for r in spec)
        for r in spec:  # an accepted draft is the token the target emitted there
            a = accepted_drafts(r) if not r.restores else 0
            assert r.draft_ids[:a] == r.tokens[:a]
    ngram = fold_tasks(read_log(FIXTURES / "ngram-mod.log.gz").records)
    assert not any(r.draft_ids for t in ngram.tasks for r in t.rounds)


def test_two_slots_interleave_yet_fold_apart() -> None:
    fold = fold_tasks(read_log(FIXTURES / "two-slots.log.gz").records)
    assert sorted(t.slot for t in fold.tasks) == [0, 0, 1, 1]
    a, b = fold.tasks[0], fold.tasks[1]
    assert a.slot != b.slot and b.first_line < a.released.line  # type: ignore[union-attr]
    for slot in (0, 1):
        first, second = [t for t in fold.tasks if t.slot == slot]
        assert second.n_past == first.released.n_tokens  # type: ignore[union-attr]
        assert second.lcp is not None and second.lcp.lcp == second.n_past


def test_a_log_cut_mid_round_drops_that_round_and_reports_it() -> None:
    text = fixture_text("ngram-mod")
    whole = fold_tasks(parse_log(text).records)
    last = whole.tasks[-1]
    restored = next(r for r in last.rounds if r.restores)
    # Cut just after that round's restore: its replay never happened in the log.
    at = text.index("\n", text.index("restoring speculative checkpoint",
                                     text.index(f"task {last.task} | processing task"))) + 1
    cut = fold_tasks(parse_log(text[:at]).records)
    assert len(cut.truncated) == 1
    gone = cut.truncated[0]
    assert (gone.slot, gone.task) == (last.slot, last.task)
    assert gone.partial is not None and gone.partial.first_line == restored.first_line
    assert len(gone.partial.restores) == 1 and gone.partial.kept is None
    kept = cut.tasks[-1].rounds
    assert [r.first_line for r in kept] == [r.first_line for r in last.rounds
                                            if r.first_line < restored.first_line]


def test_totals_that_disagree_with_the_rounds_are_violations() -> None:
    rounds = DraftProfile([(4, 4), (4, 1), (2, 0)])  # 10 drafted, 5 accepted, mean 1 + 5/3
    where = {"line": 1, "t": None, "slot": 0, "task": 0}

    def totals(generated: int, accepted: int, mean_len: float) -> DraftTotals:
        return DraftTotals(kind=RecordKind.DRAFT_TOTALS, ratio=0.5, accepted=accepted,
                           generated=generated, mean_len=mean_len, **where)

    per_pos = AccPerPos(kind=RecordKind.ACC_PER_POS, rates=(2 / 3, 1 / 3, 1 / 3, 1 / 3),
                        **where)
    assert totals_violations(rounds, totals(10, 5, 2.67), per_pos) == []
    found = totals_violations(rounds, totals(11, 5, 2.5),
                              AccPerPos(kind=RecordKind.ACC_PER_POS, rates=(1.0,), **where))
    assert [v.details["check"] for v in found] == [
        "drafted tokens", "mean accepted length", "acceptance per draft position"]
    # A task with no speculative round: llama-server prints a mean length of 1.
    assert totals_violations(DraftProfile(), totals(0, 0, 1.0), None) == []
