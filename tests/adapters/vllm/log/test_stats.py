"""vLLM's stats lines read by their `Name: value` fields: every figure a line prints, as
printed (percentages over 100), none it does not print, whatever the field order or the
version's extra fields; a SpecDecoding line joins the Engine line printed with it."""

from hypothesis import given
from hypothesis import strategies as st

from adapters.logs.intervals.run import IntervalKind
from adapters.vllm.log.stats import join_spec, stats_interval

# Real lines: our vLLM 0.32 CPU capture (tests/adapters/vllm/log/fixtures) and vllm#39680.
CPU = ("Engine 000: Avg prompt throughput: 583.0 tokens/s, Avg generation throughput: 26.8 "
       "tokens/s, Running: 1 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.3%")
GPU = ("Engine 000: Avg prompt throughput: 967.2 tokens/s, Avg generation throughput: 342.2 "
       "tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, Prefix cache "
       "hit rate: 44.5%, MM cache hit rate: 16.7%")
SPEC = ("SpecDecoding metrics: Mean acceptance length: 2.36, Accepted throughput: 14.90 "
        "tokens/s, Drafted throughput: 21.86 tokens/s, Accepted: 15 tokens, Drafted: 22 tokens,"
        " Per-position acceptance rate: 0.818, 0.545, Avg Draft acceptance rate: 68.2%")


def test_an_engine_line_gives_its_figures_and_no_others() -> None:
    iv = stats_interval(CPU, 7, "12-07 19:14:39", 0.0)
    assert iv is not None and iv.kind is IntervalKind.ENGINE and iv.engine == 0
    assert (iv.prompt_tps, iv.generation_tps, iv.running, iv.waiting, iv.kv_usage) == (
        583.0, 26.8, 1, 0, 0.003)
    assert iv.prefix_hit_rate is None and iv.mean_accept_len is None and not iv.extra
    gpu = stats_interval(GPU, 1, None, None)
    assert gpu is not None and (gpu.kv_usage, gpu.prefix_hit_rate) == (0.001, 0.445)
    assert gpu.extra == {"mm_hit_rate": 0.167}


def test_a_spec_line_joins_its_engine_line() -> None:
    engine = stats_interval(CPU, 7, "12-07 19:14:39", 0.0)
    spec = stats_interval(SPEC, 8, "12-07 19:14:39", 0.0)
    assert engine is not None and spec is not None and spec.kind is IntervalKind.SPEC
    assert join_spec(engine, spec)
    assert (engine.accepted, engine.drafted, engine.acc_per_pos, engine.draft_acceptance,
            engine.mean_accept_len) == (15, 22, [0.818, 0.545], 0.682, 2.36)
    assert not join_spec(engine, spec)  # one SpecDecoding line per Engine line
    later = stats_interval(SPEC, 9, "12-07 19:14:40", 1.0)
    fresh = stats_interval(CPU, 10, "12-07 19:14:41", 2.0)
    assert later is not None and fresh is not None and not join_spec(fresh, later)


def test_a_line_that_names_no_figure_is_no_interval() -> None:
    assert stats_interval("Engine 000: vllm cache_config_info with initialization after "
                          "num_gpu_blocks is: 2730", 1, None, None) is None
    assert stats_interval("Starting vLLM server", 1, None, None) is None


_FIELD_TEXT = {"Running": "3 reqs", "Waiting": "2 reqs", "GPU KV cache usage": "7.5%",
               "Preemptions": "4", "Avg generation throughput": "12.5 tokens/s",
               "Deferred": "1 reqs", "Some future field": "9 units"}


@given(st.permutations(list(_FIELD_TEXT)))
def test_fields_read_in_any_order_and_unknown_ones_are_skipped(order: list[str]) -> None:
    iv = stats_interval("Engine 001: " + ", ".join(f"{k}: {_FIELD_TEXT[k]}" for k in order),
                        1, None, None)
    assert iv is not None and iv.engine == 1
    assert (iv.running, iv.waiting, iv.kv_usage, iv.generation_tps) == (3, 2, 0.075, 12.5)
    assert iv.extra == {"preemptions": 4}
