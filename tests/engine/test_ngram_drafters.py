"""n-gram drafters: what they draft from a history, and their feedback rules."""

from engine.config import RunConfig
from engine.drafters.base import ChainDrafter
from engine.drafters.ngram import HashPool, NgramMapK, NgramMod, NgramParams, NgramSimple
from engine.drafters.registry import make_drafter
from engine.session import MemoryJournal, Session
from fsm.states import Trigger

P = NgramParams(n=3, m=4)


def _draft(d: object, tokens: list[int], k: int = 8) -> list[int]:
    return d.propose(None, None, tokens, k)  # type: ignore[attr-defined]


def test_ngram_simple_drafts_what_followed_the_latest_match() -> None:
    hist = [1, 2, 3, 9, 9, 5, 1, 2, 3, 7, 8, 6, 0, 1, 2, 3]
    assert _draft(NgramSimple(P), hist, k=3) == [7, 8, 6]
    assert _draft(NgramSimple(P), [4, 5, 6, 7]) == []
    assert _draft(NgramSimple(NgramParams(n=3, draft_min=6)), [1, 2, 3, 4, 5, 1, 2, 3]) == []


def test_ngram_map_k_needs_min_hits() -> None:
    once = [1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3]
    twice = [1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3]
    strict = NgramParams(n=3, m=4, min_hits=2)
    assert _draft(NgramMapK(P), once) == [4, 5, 6, 7]
    assert _draft(NgramMapK(strict), once) == []
    assert _draft(NgramMapK(strict), twice) == [4, 5, 6, 7]


def test_ngram_map_k_reindexes_a_rewritten_history() -> None:
    d = NgramMapK(P)
    assert _draft(d, [1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3]) == [4, 5, 6, 7]
    assert _draft(d, [1, 2, 3, 9, 9, 9, 9, 0, 1, 2, 3]) == [9, 9, 9, 9]


def test_ngram_mod_grows_drafts_token_by_token_and_shares_its_pool() -> None:
    pool = HashPool(1 << 16)
    a, b = NgramMod(P, pool), NgramMod(P, pool)
    _draft(a, [10, 11, 12, 13, 14, 15, 16])
    assert _draft(b, [99, 10, 11, 12], k=3) == [13, 14, 15]


def test_ngram_mod_clears_the_pool_after_a_low_acceptance_streak() -> None:
    pool = HashPool(1 << 16)
    d = NgramMod(NgramParams(n=2, reset_streak=3), pool)
    _draft(d, [1, 2, 3, 4, 5])
    assert pool.table
    d.on_commit(8, 0)
    d.on_commit(8, 0)
    d.on_commit(8, 6)  # a good round breaks the streak
    d.on_commit(8, 0)
    d.on_commit(8, 0)
    assert pool.table and pool.resets == 0
    d.on_commit(8, 0)
    assert not pool.table and pool.resets == 1


def test_chain_takes_the_first_drafter_with_a_draft() -> None:
    config = RunConfig(drafter="ngram-map-k,ngram-simple", ngram_n=3)
    chain = make_drafter(config, 0, {})
    assert isinstance(chain, ChainDrafter) and chain.name == "ngram-map-k,ngram-simple"
    assert _draft(chain, [1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3], k=2) == [4, 5]
    assert chain.used is chain.drafters[0]


def test_ngram_drafters_keep_state_true_on_the_sim() -> None:
    for name in ("ngram-simple", "ngram-map-k", "ngram-mod"):
        config = RunConfig(drafter=name, ngram_n=1, turns=2, prompt_tokens=300,
                           answer_tokens=200, strategy="checkpoint")
        journal = MemoryJournal()
        Session(config, journal).run()
        assert not [e for e in journal.events if e.trigger is Trigger.INVARIANT_VIOLATION]
        assert [e for e in journal.events if e.trigger is Trigger.DECODE]
