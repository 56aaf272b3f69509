"""How specledger starts vLLM's OpenAI server: the settings (`VllmOptions`), their command
line (`server_args`) and environment (`server_env`), and our drafter names mapped onto
vLLM's speculative methods (`speculative_method`).

vLLM runs one speculative method at a time, so a chain of drafters is refused; our names
map as:

- `ngram-simple` -> `ngram`: prompt lookup, the tokens that followed the last n tokens'
  earlier occurrence (n fixed at `--ngram-n`: `prompt_lookup_min` = `prompt_lookup_max`);
- `mtp` -> `mtp`: the target's own MTP head (vLLM names it `qwen3_5_mtp` for this
  architecture);
- `draft-model` -> `draft_model`: a separate small model, loaded beside the target; but
  vLLM 0.32 cannot run it on a Qwen3.5 draft (`CANNOT_RUN`), so it is refused here.

`ngram-map-k` and `ngram-mod` are llama.cpp's own lookups, with no vLLM counterpart.

Prefix caching is off whenever a method runs: with it on, vLLM keeps a hybrid model's
Mamba/GDN cache in "align" mode, whose block copy (`mamba_utils.run_fused_precopy`) is a
Triton kernel the CPU build lacks ("'function' object is not subscriptable"). Without it
every turn of a conversation prefills the whole conversation again.
"""

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from adapters.process import HOST
from adapters.vllm.errors import MethodUnsupportedError

SERVED_NAME = "specledger"
"""The model name requests use (`--served-model-name`), whatever directory it is."""
KV_CACHE_GIB = 1
"""VLLM_CPU_KVCACHE_SPACE: vLLM's CPU build reserves this much memory for the KV cache (its
default, 4 GiB, is far more than a 2048-token context of the shipped models needs)."""


class Method(StrEnum):
    """A vLLM speculative method, by vLLM's own name."""

    NGRAM = "ngram"
    MTP = "mtp"
    DRAFT_MODEL = "draft_model"


METHODS = {"ngram-simple": Method.NGRAM, "mtp": Method.MTP, "draft-model": Method.DRAFT_MODEL}
"""Our drafter name -> the vLLM method that does the same."""
CANNOT_RUN = {
    Method.DRAFT_MODEL: "vLLM 0.32 rewrites every Qwen3.5 draft model's config into its MTP "
                        "module (SpeculativeConfig.hf_config_override: model_type "
                        "qwen3_5_mtp, n_predict = mtp_num_hidden_layers), and a draft model "
                        "has no MTP layer, so the server exits at startup with "
                        "\"ZeroDivisionError: integer modulo by zero\"",
}
"""The methods vLLM cannot run on our models, and the error it gives (measured here)."""


def speculative_method(drafters: Sequence[str]) -> Method | None:
    """The vLLM method of our drafter chain `drafters` (None: plain decoding), or
    MethodUnsupportedError saying what vLLM can run."""
    names = [d for d in drafters if d != "none"]
    if not names:
        return None
    if len(names) > 1:
        raise MethodUnsupportedError(f"drafter: vLLM runs one speculative method, not the "
                                     f"chain {','.join(names)}: pass one of them")
    method = METHODS.get(names[0])
    runs = ", ".join(n for n, m in METHODS.items() if m not in CANNOT_RUN)
    if method is None:
        raise MethodUnsupportedError(f"drafter: {names[0]} has no vLLM counterpart (vLLM "
                                     f"runs {runs}, or none)")
    if method in CANNOT_RUN:
        raise MethodUnsupportedError(f"drafter: {names[0]} cannot run on vLLM: "
                                     f"{CANNOT_RUN[method]}; run {runs}, or none")
    return method


@dataclass(frozen=True)
class VllmOptions:
    """One vLLM server: the target directory, the speculative method and its sizes (the
    draft model's directory for `draft_model`), the context length, the port (0: a free
    one), whether to skip compiling the model (`--enforce-eager`: ready in 108 s here,
    against 189 s compiled), the chat template file, and how long to wait for health."""

    model: Path
    method: Method | None = None
    draft_max: int = 4
    ngram_n: int = 4
    draft_model: Path | None = None
    max_model_len: int = 4096
    port: int = 0
    eager: bool = True
    chat_template: Path | None = None
    startup_timeout_s: float = 600.0
    log_level: str = "INFO"
    """vLLM's logging level (`DEBUG`: its debug lines too)."""
    stats_interval_s: float = 10.0
    """How often vLLM logs its stats lines (vLLM's default: 10 s)."""
    log_requests: bool = False
    """Log each request as it arrives and finishes (`--enable-log-requests`)."""

    @property
    def prefix_caching(self) -> bool:
        """Prefix caching is on only for plain decoding (see the module's docstring)."""
        return self.method is None

    def speculative_config(self) -> dict[str, Any] | None:
        """The `--speculative-config` object (None: plain decoding)."""
        if self.method is None:
            return None
        spec: dict[str, Any] = {"method": self.method.value,
                                "num_speculative_tokens": self.draft_max}
        if self.method is Method.NGRAM:
            spec |= {"prompt_lookup_min": self.ngram_n, "prompt_lookup_max": self.ngram_n}
        elif self.method is Method.DRAFT_MODEL:
            if self.draft_model is None:
                raise MethodUnsupportedError("drafter draft-model: pass --draft-model DIR")
            spec["model"] = str(self.draft_model)
        return spec


def server_args(opts: VllmOptions, port: int) -> list[str]:
    """The arguments after `python -m vllm.entrypoints.openai.api_server`. Per-request
    metrics are on (each answer carries its timings and, at `detailed`, the accepted and
    drafted counts of every verify step, in order)."""
    args = ["--model", str(opts.model), "--served-model-name", SERVED_NAME,
            "--dtype", "bfloat16", "--max-model-len", str(opts.max_model_len),
            "--host", HOST, "--port", str(port), "--enable-per-request-metrics",
            "--enable-prefix-caching" if opts.prefix_caching else "--no-enable-prefix-caching"]
    if opts.chat_template is not None:
        args += ["--chat-template", str(opts.chat_template)]
    spec = opts.speculative_config()
    if spec is not None:
        args += ["--speculative-config", json.dumps(spec, separators=(",", ":")),
                 "--per-request-spec-decode-metrics", "detailed"]
    if opts.eager:
        args.append("--enforce-eager")
    if opts.log_requests:
        args.append("--enable-log-requests")
    return args


def log_env(opts: VllmOptions) -> dict[str, str]:
    """The environment that sets vLLM's logging as the options ask (empty: its defaults)."""
    env = {}
    if opts.log_level != "INFO":
        env["VLLM_LOGGING_LEVEL"] = opts.log_level
    if opts.stats_interval_s != 10.0:
        env["VLLM_LOG_STATS_INTERVAL"] = f"{opts.stats_interval_s:g}"
    return env


def server_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: ours without `VLLM_*` settings (the command line is its
    configuration), the KV cache size, and nothing that reaches the network (no usage
    report, no model hub)."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith("VLLM_")}
    return env | {"VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB), "VLLM_NO_USAGE_STATS": "1",
                  "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
