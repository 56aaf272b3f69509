"""Batch lines read field by field as printed: both punctuation dialects, the hybrid and
SWA fields, NPU graphs, and a field the table does not know kept rather than lost."""

from hypothesis import given
from hypothesis import strategies as st

from adapters.sglang.log.fields import FIELDS, pairs, read_batch
from adapters.sglang.log.records import BatchKind


def test_old_dialect_with_its_trailing_comma() -> None:
    b = read_batch(BatchKind.DECODE, "#running-req: 1, #token: 108, token usage: 0.00, "
                   "accept len: 2.17, accept rate: 0.54, cuda graph: True, "
                   "gen throughput (token/s): 0.39, #queue-req: 0, ", 2, "2025-10-22 10:27:57",
                   "TP0")
    assert (b.running_req, b.token, b.token_usage, b.accept_len, b.accept_rate) == (
        1, 108, 0.0, 2.17, 0.54)
    assert (b.graph, b.graph_device, b.gen_throughput, b.queue_req) == (True, "cuda", 0.39, 0)
    assert b.full_token is None and b.mamba_usage is None and not b.other


def test_hybrid_fields_stay_apart_from_the_plain_pool() -> None:
    b = read_batch(BatchKind.DECODE, "#running-req: 40, #full token: 356096, full token "
                   "usage: 0.76, mamba num: 159, mamba usage: 0.80, accept len: 3.84, accept "
                   "rate: 0.95, npu graph: True, gen throughput (token/s): 1847.75, "
                   "#queue-req: 0", 7, None, None)
    assert (b.full_token, b.full_token_usage, b.mamba_num, b.mamba_usage) == (
        356096, 0.76, 159, 0.80)
    assert b.token is None and b.token_usage is None
    assert (b.graph, b.graph_device) == (True, "npu")


def test_prefill_fields_and_the_old_cache_hit_percent() -> None:
    b = read_batch(BatchKind.PREFILL, "#new-seq: 1, #new-token: 21, #cached-token: 0, cache "
                   "hit rate: 12.50%, token usage: 0.00, #running-req: 0, #queue-req: 0",
                   1, None, "TP0")
    assert (b.new_seq, b.new_token, b.cached_token, b.cache_hit_rate) == (1, 21, 0, 12.5)
    s = read_batch(BatchKind.PREFILL, "#new-seq: 1, #new-token: 7, #cached-token: 0, full "
                   "token usage: 0.00, swa token usage: 0.01, #running-req: 0, #queue-req: 0, "
                   "#pending-token: 492, cuda graph: False, input throughput (token/s): 1.81",
                   1, None, None)
    assert (s.swa_token_usage, s.pending_token, s.graph, s.input_throughput) == (
        0.01, 492, False, 1.81)


def test_an_unknown_field_or_unreadable_value_is_kept_as_printed() -> None:
    b = read_batch(BatchKind.DECODE, "#running-req: 2, #retracted-req: 3, cuda graph: maybe, "
                   "#queue-req: x", 1, None, None)
    assert b.running_req == 2 and b.graph is None and b.queue_req is None
    assert b.other == {"#retracted-req": "3", "cuda graph": "maybe", "#queue-req": "x"}


_VALUES = {"int": st.integers(0, 10**7), "float": st.floats(0, 10**5).map(lambda x: round(x, 2)),
           "bool": st.booleans()}


def _kind(key: str) -> str:
    read = FIELDS[key].read
    return "int" if read is int else "float" if read is float else "bool" \
        if key.endswith("graph") else "pct"


@given(st.lists(st.sampled_from([k for k in FIELDS if _kind(k) != "pct"
                                 and k != "npu graph"]), unique=True, min_size=1)
       .flatmap(lambda keys: st.tuples(st.just(keys),
                                       st.tuples(*(_VALUES[_kind(k)] for k in keys)))),
       st.sampled_from([", ", ","]))
def test_every_printed_field_reads_back(fields: tuple[list[str], tuple[object, ...]],
                                        tail: str) -> None:
    keys, values = fields
    text = ", ".join(f"{k}: {v:.2f}" if isinstance(v, float) else f"{k}: {v}"
                     for k, v in zip(keys, values, strict=True)) + tail
    b = read_batch(BatchKind.DECODE, text, 1, None, None)
    assert not b.other and len(pairs(text)) == len(keys)
    for k, v in zip(keys, values, strict=True):
        assert getattr(b, FIELDS[k].attr) == v
