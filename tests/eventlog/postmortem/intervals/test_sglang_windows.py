"""The interval detectors on windows as SGLang prints them (acceptance length and rate,
no counts; `#token`; `#cached-token` instead of a hit rate): a collapse judged on the
engine's rates, a running request holding no KV token, a hybrid's prefills that never hit
the cache, and healthy windows named by nothing."""

from eventlog.postmortem.finding import Kind
from eventlog.postmortem.intervals import Windows
from eventlog.postmortem.intervals.acceptance import IntervalAcceptance
from eventlog.postmortem.intervals.counters import IntervalCounters, contradictions
from eventlog.postmortem.intervals.prefix_cache import PrefixCacheZero
from tests.eventlog.postmortem.intervals.sglang_windows import CONFIG, feed, window


def test_windows_with_only_a_rate_drafted() -> None:
    w = Windows()
    w.on_interval((1,), window(1, mean_accept_len=2.5, draft_acceptance=0.5))
    w.on_interval((2,), window(2, generation_tps=40.0))
    assert [s for s, _ in w.speculative] == [1]


def test_a_collapse_is_judged_on_the_engines_rates() -> None:
    rates = [0.6, 0.55, 0.6, 0.1, 0.12, 0.08]
    [f] = feed(IntervalAcceptance(CONFIG), [
        window(i, mean_accept_len=1 + 3 * r, draft_acceptance=r)
        for i, r in enumerate(rates, 1)])
    assert f.kind is Kind.ACCEPTANCE_COLLAPSE and f.numbers["first_line"] == 1
    assert round(f.numbers["first_half"], 4) == 0.5833 and round(f.numbers["second_half"],
                                                                 2) == 0.1
    [low] = feed(IntervalAcceptance(CONFIG), [window(i, mean_accept_len=1.1,
                                                     draft_acceptance=0.03) for i in (1, 2)])
    assert "averaged 3.0%" in low.explanation
    steady = [window(i, mean_accept_len=3.8, draft_acceptance=0.95) for i in range(1, 9)]
    assert feed(IntervalAcceptance(CONFIG), steady) == []


def test_a_running_request_with_no_kv_token_contradicts_its_line() -> None:
    assert contradictions(window(386, running=1, tokens=0)) == [
        "1 request(s) running but 0 KV tokens in use (#token)"]
    assert contradictions(window(1, running=0, tokens=0)) == []
    [f] = feed(IntervalCounters(CONFIG), [window(1, running=2, tokens=500),
                                          window(2, running=1, tokens=0)])
    assert f.kind is Kind.ENGINE_COUNTER_MISMATCH and f.numbers["first_line"] == 2


def test_prefills_that_never_hit_the_cache_on_a_hybrid_with_speculation() -> None:
    cold = [window(i, prompt_tps=900.0, cached_tokens=0, new_tokens=4096) for i in (1, 2, 3)]
    [f] = feed(PrefixCacheZero(CONFIG), cold)
    assert f.kind is Kind.PREFIX_CACHE_ZERO and f.numbers["windows"] == 3
    warm = [*cold, window(4, prompt_tps=800.0, cached_tokens=70016, new_tokens=128)]
    assert feed(PrefixCacheZero(CONFIG), warm) == []
