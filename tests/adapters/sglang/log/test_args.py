"""A server's `ServerArgs(…)` line read as its arguments: nested configs and lists do not
split it, literals read as Python's, and the settings the findings need are typed."""

from adapters.sglang.log.args import ServerInfo, read_args, split_top

LINE = ("ServerArgs(model_path='Qwen/Qwen3.6-27B', tp_size=2, dp_size=1, "
        "cuda_graph_config=CudaGraphConfig(decode=PhaseConfig(backend='full', max_bs=8, "
        "bs=[1, 2, 3]), prefill=None), speculative_algorithm='EAGLE', "
        "speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4, "
        "disable_radix_cache=False, mamba_scheduler_strategy='extra_buffer', "
        "served_model_name='qwen', weird='a, b', mem_fraction_static=0.88)")


def test_nested_values_and_quoted_commas_do_not_split_the_line() -> None:
    args = read_args(LINE)
    assert args["cuda_graph_config"] == ("CudaGraphConfig(decode=PhaseConfig(backend='full', "
                                         "max_bs=8, bs=[1, 2, 3]), prefill=None)")
    assert args["weird"] == "a, b" and args["mem_fraction_static"] == 0.88
    assert split_top("a=1, b=[1, 2], c='x,y'") == ["a=1", "b=[1, 2]", "c='x,y'"]


def test_the_settings_are_typed_and_the_served_name_wins() -> None:
    info = ServerInfo()
    info.take_args(read_args(LINE))
    assert (info.model, info.speculative_algorithm, info.num_steps, info.eagle_topk,
            info.num_draft_tokens) == ("qwen", "EAGLE", 3, 1, 4)
    assert (info.tp_size, info.disable_radix_cache, info.mamba_scheduler_strategy) == (
        2, False, "extra_buffer")
    assert info.mamba_radix_cache_strategy is None


def test_a_line_cut_short_keeps_what_came_before_the_cut() -> None:
    args = read_args("ServerArgs(model_path='m', tp_size=1, speculative_algo")
    assert args == {"model_path": "m", "tp_size": 1}
    info = ServerInfo()
    info.take_args({"tp_size": True, "model_path": "m"})
    assert info.tp_size is None and info.model == "m" and info.speculative_algorithm is None
