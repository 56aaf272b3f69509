"""The engines suite's pure parts: Prometheus totals, a row per engine and method from the
fastest pass, lossless against the engine's own plain answers up to near-ties, refused
methods kept."""

from adapters.differential import Answer
from specbench.engines import rows, table
from specbench.engines.runs import EngineRun, prometheus_total

PAGE = """# HELP llamacpp:spec_decode_num_drafts_total Speculative: verification steps
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 12
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 3.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 2.0
vllm:spec_decode_num_accepted_tokens_per_pos_total_created{engine="0",position="0"} 1.7e9
"""


def test_prometheus_total_sums_a_metrics_label_sets() -> None:
    assert prometheus_total(PAGE, "llamacpp:spec_decode_num_drafts_total") == 12
    assert prometheus_total(PAGE, "vllm:spec_decode_num_accepted_tokens_per_pos_total") == 5
    assert prometheus_total(PAGE, "vllm:generation_tokens_total") is None


def run(engine: str, method: str, repeat: int, decode_s: float, answers: list[Answer],
        drafted: int = 0, accepted: int = 0, steps: int | None = None) -> EngineRun:
    """A pass that generated 100 tokens."""
    return EngineRun(engine, method, method, "float32", repeat, 100, decode_s, drafted,
                     accepted, steps, answers)


def answer(tokens: list[int], gaps: list[float | None]) -> Answer:
    """An answer with the given gaps."""
    return Answer(tuple(tokens), tuple(gaps))


PLAIN = [answer([1, 2], [None, None])]
CLEAR, TIED = [answer([1, 3], [9.0, 2.0])], [answer([1, 3], [9.0, 1e-4])]


def test_rows_take_the_fastest_pass_and_judge_against_the_engines_plain() -> None:
    runs = [run("ours", "none", 0, 2.0, PLAIN), run("ours", "none", 1, 1.0, PLAIN),
            run("ours", "mtp", 0, 0.5, PLAIN, drafted=40, accepted=30, steps=10),
            run("ours", "ngram-mod", 0, 0.5, [answer([1, 3], [None, None])], drafted=4,
                accepted=1, steps=2),
            run("llama.cpp", "none", 0, 0.3, TIED),
            run("llama.cpp", "mtp", 0, 0.4, [answer([1, 4], [None, None])], drafted=4,
                accepted=1, steps=2),
            run("vllm", "none", 0, 0.25, CLEAR),
            run("vllm", "ngram-simple", 0, 0.2, [answer([1, 4], [9.0, 2.0])], drafted=8,
                accepted=2, steps=4)]
    found = rows(runs, {"mtp": "refused: ModelRefusedError: no MTP | weights"})
    by = {(r["engine"], r["method"]): r for r in found}
    assert list(by) == [("ours", "none"), ("ours", "mtp"), ("ours", "ngram-mod"),
                        ("llama.cpp", "none"), ("llama.cpp", "mtp"), ("vllm", "none"),
                        ("vllm", "ngram-simple"), ("vllm", "mtp")]
    plain, mtp = by["ours", "none"], by["ours", "mtp"]
    assert plain["tok_s"] == 100 and plain["tok_s_passes"] == [50, 100]
    assert mtp["speedup"] == 2.0 and mtp["acceptance"] == 0.75 and mtp["mean_length"] == 4.0
    assert mtp["vs_plain"] == {"answers": 1, "identical": 1, "near_ties": 0, "lossless": True}
    # Ours reports no gaps: a difference is no near-tie. llama.cpp's plain answer parts at a
    # near-tie of its own gap; vLLM's ngram at a clear one (vLLM's plain answers differ
    # from ours: no matter, each engine is judged against its own).
    assert not by["ours", "ngram-mod"]["vs_plain"]["lossless"]
    assert by["llama.cpp", "mtp"]["vs_plain"]["near_ties"] == 1
    assert by["llama.cpp", "mtp"]["vs_plain"]["lossless"]
    assert not by["vllm", "ngram-simple"]["vs_plain"]["lossless"]
    assert by["vllm", "mtp"]["failed"].startswith("refused: ModelRefusedError")
    text = table(found)
    assert "| ours | mtp | float32 | 200 | 2.00x | 0.75 | 4.00 | yes |" in text
    assert "| llama.cpp | mtp | float32 | 250 | 0.75x | 0.25 | 1.50 | yes (1/1 part at a " \
           "near-tie) |" in text
    assert "| vllm | ngram-simple | float32 | 500 | 1.25x | 0.25 | 1.50 | **NO** |" in text
    assert "| vllm | mtp | bfloat16 | - | - | - | - | refused: ModelRefusedError: no MTP / " \
           "weights |" in text
