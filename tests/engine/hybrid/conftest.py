"""Tiny random Qwen3.5 checkpoints built with transformers (the peer implementation),
saved with `save_pretrained` and loaded back with our loader, once per session."""

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

from engine.hybrid import HybridModel, load_checkpoint

LIN, FULL = "linear_attention", "full_attention"
# Our own paths against each other (decode vs prefill, split vs one-shot prefill): fp32
# rounding differs with batch shape and chunking, and a few ill-conditioned positions of
# these random models amplify it to ~1e-4 of the logit range (transformers differs from us
# by as much there), hence a looser bound than the transformers comparison's 1e-4.
SELF_TOL = 5e-4
_BASE: dict[str, Any] = dict(
    vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_key_head_dim=16,
    linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
    linear_conv_kernel_dim=4, tie_word_embeddings=True,
)
# Head counts, conv kernel sizes 2..4, tying and layer orders all vary across these.
CONFIGS: dict[str, dict[str, Any]] = {
    "gqa_tied_k4": dict(layer_types=[LIN, LIN, LIN, FULL]),
    "mha_untied_k2": dict(
        linear_conv_kernel_dim=2, tie_word_embeddings=False, num_key_value_heads=4,
        linear_num_key_heads=4, head_dim=32, layer_types=[FULL, LIN, FULL, LIN],
        rope_parameters={"rope_type": "default", "rope_theta": 1000.0,
                         "partial_rotary_factor": 0.5},
    ),
    "bias_grouped_k3": dict(
        linear_conv_kernel_dim=3, attention_bias=True, num_attention_heads=8,
        linear_num_key_heads=1, linear_key_head_dim=8, layer_types=[LIN, FULL, LIN, LIN],
    ),
}


@dataclass(frozen=True)
class Pair:
    """The transformers model and ours, loaded from the checkpoint it saved."""

    reference: Qwen3_5ForCausalLM
    model: HybridModel
    path: Path


def build_reference(name: str, seed: int = 0) -> Qwen3_5ForCausalLM:
    """A transformers model of config `name` with every parameter randomised (HF's init
    leaves norms at their identity, which would hide the zero-centred weight layout)."""
    torch.manual_seed(seed)
    model = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**{**_BASE, **CONFIGS[name]})).eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("A_log"):  # decays that keep some memory over ~10 tokens
                p.copy_(torch.empty_like(p).uniform_(0.05, 2.0).log())
            elif "norm" in pname or pname.endswith("dt_bias"):
                p.add_(torch.randn_like(p) * 0.3)
            else:
                p.normal_(0.0, 0.5 / math.sqrt(p.shape[-1]))
    return model


@pytest.fixture(scope="session")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Pair]:
    """`pair(name)`: the reference model and ours for a config, built once per session."""
    cache: dict[str, Pair] = {}

    def get(name: str) -> Pair:
        if name not in cache:
            reference = build_reference(name)
            path = tmp_path_factory.mktemp(name)
            reference.save_pretrained(path)
            cache[name] = Pair(reference, load_checkpoint(path).model, path)
        return cache[name]

    return get
