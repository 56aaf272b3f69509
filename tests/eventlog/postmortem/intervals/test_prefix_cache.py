"""A hybrid model's prefix cache hitting nothing under speculation: a note where the log
says caching is off, a warning where it is on; a model not known to be hybrid, a hit, or
no speculation says nothing."""

from adapters.logs.intervals.run import IntervalKind, IntervalLine
from eventlog.postmortem.finding import Kind, Severity
from tests.eventlog.postmortem.intervals.runs import findings, run_of, spec


def _windows(hit: float) -> list[object]:
    return [spec(i, 8, 10, [0.8], prompt_tps=100.0, prefix_hit_rate=hit) for i in range(3)]


def test_zero_hits_on_a_hybrid_with_speculation() -> None:
    on = run_of(*_windows(0.0), hybrid=True, method="mtp", prefix_caching=True)
    off = run_of(*_windows(0.0), hybrid=True, method="mtp", prefix_caching=False)
    assert [(f.kind, f.severity) for f in findings(on)] == [
        (Kind.PREFIX_CACHE_ZERO, Severity.WARNING)]
    assert [(f.kind, f.severity) for f in findings(off)] == [
        (Kind.PREFIX_CACHE_ZERO, Severity.INFO)]


def test_hits_or_an_unknown_architecture_say_nothing() -> None:
    assert findings(run_of(*_windows(0.3), hybrid=True, method="mtp")) == []
    assert findings(run_of(*_windows(0.0), method="mtp")) == []


def _prefill(line: int, cached: int) -> IntervalLine:
    """An SGLang `Prefill batch`: its cached prompt tokens, no hit rate."""
    return IntervalLine(line, IntervalKind.PREFILL_BATCH, None, float(line), prompt_tps=900.0,
                        extra={"new_tokens": 4096, "cached_tokens": cached})


def test_prefills_with_no_cached_token_are_zero_hits() -> None:
    decode = spec(9, 8, 10, [0.8])
    cold = [_prefill(i, 0) for i in (1, 2, 3)]
    (f,) = findings(run_of(*cold, decode, hybrid=True, method="EAGLE"))
    assert f.kind is Kind.PREFIX_CACHE_ZERO and f.numbers["windows"] == 3
    assert findings(run_of(*cold, _prefill(4, 70016), decode, hybrid=True,
                           method="EAGLE")) == []
