"""Our drafter names as vLLM's speculative methods, and the server's command line."""

import json
from pathlib import Path

import pytest

from adapters.vllm.errors import MethodUnsupportedError
from adapters.vllm.options import (
    Method,
    VllmOptions,
    server_args,
    server_env,
    speculative_method,
)


@pytest.mark.parametrize("ours,method", [
    (("none",), None), (("ngram-simple",), Method.NGRAM), (("mtp",), Method.MTP)])
def test_our_drafters_map_onto_vllms_methods(ours: tuple[str, ...],
                                             method: Method | None) -> None:
    assert speculative_method(ours) is method


@pytest.mark.parametrize("ours,problem", [
    (("ngram-mod",), "ngram-mod has no vLLM counterpart"),
    (("ngram-map-k",), "ngram-map-k has no vLLM counterpart"),
    (("ngram-simple", "mtp"), "one speculative method, not the chain ngram-simple,mtp"),
    (("draft-model",), "draft-model cannot run on vLLM: vLLM 0.32 rewrites every Qwen3.5 "
                       "draft model's config into its MTP module")])
def test_what_vllm_cannot_run_is_refused_in_one_line(ours: tuple[str, ...],
                                                     problem: str) -> None:
    with pytest.raises(MethodUnsupportedError) as raised:
        speculative_method(ours)
    assert problem in str(raised.value) and "\n" not in str(raised.value)


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_ngram_looks_up_a_fixed_n_and_turns_prefix_caching_off() -> None:
    args = server_args(VllmOptions(Path("m"), Method.NGRAM, draft_max=6, ngram_n=3), 8000)
    spec = json.loads(_flag(args, "--speculative-config"))
    assert spec == {"method": "ngram", "num_speculative_tokens": 6, "prompt_lookup_min": 3,
                    "prompt_lookup_max": 3}
    assert "--no-enable-prefix-caching" in args and "--enable-prefix-caching" not in args
    assert _flag(args, "--per-request-spec-decode-metrics") == "detailed"
    assert (_flag(args, "--dtype"), _flag(args, "--port")) == ("bfloat16", "8000")


def test_plain_decoding_keeps_prefix_caching() -> None:
    args = server_args(VllmOptions(Path("m")), 8000)
    assert "--enable-prefix-caching" in args and "--speculative-config" not in args
    assert "--per-request-spec-decode-metrics" not in args


def test_a_draft_model_is_named_by_its_directory() -> None:
    opts = VllmOptions(Path("t"), Method.DRAFT_MODEL, draft_model=Path("/d"))
    assert json.loads(_flag(server_args(opts, 1), "--speculative-config"))["model"] == "/d"
    with pytest.raises(MethodUnsupportedError, match="--draft-model"):
        server_args(VllmOptions(Path("t"), Method.DRAFT_MODEL), 1)


def test_the_environment_is_the_command_lines_and_stays_offline() -> None:
    env = server_env({"VLLM_CPU_KVCACHE_SPACE": "40", "VLLM_USE_V1": "0", "PATH": "/bin"})
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and "VLLM_USE_V1" not in env
    assert env["PATH"] == "/bin" and env["HF_HUB_OFFLINE"] == "1"
