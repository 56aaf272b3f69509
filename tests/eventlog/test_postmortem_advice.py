"""Every kind of finding has advice of its own that fits it: no kind borrows another's
text, and each names what its finding is about (the findings that carry it are checked on
real logs in tests/adapters/llama/test_postmortem.py and tests/eventlog/test_postmortem.py)."""

import itertools

from eventlog.postmortem.advice import ADVICE, CAUSE_ADVICE, INVARIANT_ADVICE, Cause
from eventlog.postmortem.finding import Kind
from fsm.invariants import Invariant

# What each kind's advice must speak of: the thing that went wrong, or its fix.
SUBJECT = {
    Kind.EOG_STRAY_TOKENS: "EOG",
    Kind.HISTORY_REPREFILL: "history",
    Kind.STOP_STRAY_TOKENS: "length limit",
    Kind.REPLAY_LIVELOCK: "--livelock-guard",
    Kind.RESTORE_STORM: "repeated restore",
    Kind.STATE_CONTAMINATION: "recurrent state back",
    Kind.OUTPUT_MISMATCH: "plain decoding",
    Kind.SPECULATIVE_NOT_LOSSLESS: "#39273",
    Kind.DRAFT_CHECKPOINT_DISCARD: "draft model's checkpoints",
    Kind.ACCEPTANCE_COLLAPSE: "low-acceptance streak",
    Kind.INVARIANT_VIOLATION: "invariant",
    Kind.ENGINE_COUNTER_MISMATCH: "counter",
    Kind.ACCEPTANCE_INFLATION: "PR 26320",
    Kind.SAMPLER_MISMATCH: "sampler parameter",
    Kind.RUN_FAILED: "error",
    Kind.INCOMPLETE_LOG: "Re-run",
    Kind.CHECK_SKIPPED: "fields the checks need",
    Kind.SERVER_CRASH: "last lines",
    Kind.KV_CACHE_EXHAUSTED: "KV cache",
    Kind.HTTP_ERRORS: "HTTP error",
    Kind.CHECKPOINTS_ERASED: "checkpoint",
    Kind.ACCEPTANCE_IMPLAUSIBLE: "accounting",
    Kind.DRAFTER_STATS: "drafts nothing",
    Kind.PARTIAL_REQUEST: "whole log",
    Kind.SPECULATION_SLOWER: "without speculation",
    Kind.REQUESTS_WAITING: "concurrency",
    Kind.PREFIX_CACHE_ZERO: "prefix caching",
    Kind.DRAFT_POSITIONS_WASTED: "num_speculative_tokens",
    Kind.ACCEPTANCE_SATURATED: "repetition loop",
}
CAUSE_SUBJECT = {Cause.IMPORTED: "Import the log again",
                 Cause.DRAFT_STATE_NOT_SAVED: "draft model's state",
                 Cause.SAMPLED: "greedy", Cause.NO_PREFIX_CACHE: "prefix cache",
                 Cause.SERVER_ROLLBACK: "whole slot", Cause.KNOWN_BUILD_BUG: "known bug",
                 Cause.WINDOWED_ACCEPTANCE: "drafter matches the target",
                 Cause.ENGINE_CORE: "last lines", Cause.ENGINE_KV: "KV cache",
                 Cause.ENGINE_COUNTERS: "counters disagree"}


def test_every_kind_and_cause_has_advice_about_its_subject() -> None:
    assert set(ADVICE) == set(Kind) == set(SUBJECT)
    for kind, text in ADVICE.items():
        assert SUBJECT[kind] in text, kind
    assert set(CAUSE_ADVICE) == set(Cause)
    for cause, text in CAUSE_ADVICE.items():
        assert CAUSE_SUBJECT[cause] in text, cause
    assert set(INVARIANT_ADVICE) == set(Invariant)


def test_no_two_findings_share_advice() -> None:
    texts = [*ADVICE.values(), *CAUSE_ADVICE.values(), *INVARIANT_ADVICE.values()]
    for a, b in itertools.combinations(texts, 2):
        assert a != b, a
    # The slot-bookkeeping advice stays with the slot's bookkeeping.
    assert sum("KV length" in t for t in texts) == 1
    assert "KV length" in INVARIANT_ADVICE[Invariant.BOOKKEEPING]
