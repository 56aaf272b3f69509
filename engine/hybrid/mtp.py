"""The multi-token-prediction (MTP) head in the Qwen3.5 / Qwen3-Next `mtp.*` layout: it
predicts token t+2 from the target's final (normed) hidden state at t and the embedding of
token t+1:

    h' = layer(fc([pre_fc_norm_embedding(embed(x[t+1])), pre_fc_norm_hidden(h[t])]))
    logits = lm_head(norm(h'))

with one full-attention decoder layer of its own and the target's embedding and LM head.
Its weights ship inside the target's checkpoint under `mtp.`, which `load_checkpoint`
skips; `load_mtp` reads them."""

import dataclasses
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import safe_open
from torch import Tensor, nn

from engine.hybrid.config import FULL
from engine.hybrid.errors import CheckpointFormatError, HybridError
from engine.hybrid.layers import ZeroCentredRMSNorm, rotary_tables
from engine.hybrid.loader import load_checkpoint
from engine.hybrid.model import DecoderLayer, HybridModel
from engine.hybrid.state import HybridState
from engine.shipped import model_dir

PREFIX = "mtp."


class MtpHead(nn.Module):
    """MTP head bound to a target model whose embedding and LM head it uses (they are not
    this module's parameters, so `state_dict()` holds only the `mtp.*` tensors, unprefixed).
    Its attention layer keeps its own KV cache: a `HybridState` from `new_state`, whose
    position p means the pairs (hidden[i], token[i+1]) for i < p are cached."""

    def __init__(self, target: HybridModel) -> None:
        super().__init__()
        config = target.config
        hidden, eps = config.hidden_size, config.rms_norm_eps
        self.pre_fc_norm_embedding = ZeroCentredRMSNorm(hidden, eps)
        self.pre_fc_norm_hidden = ZeroCentredRMSNorm(hidden, eps)
        self.fc = nn.Linear(2 * hidden, hidden, bias=False)
        self.layers = nn.ModuleList([DecoderLayer(config, FULL)])
        self.norm = ZeroCentredRMSNorm(hidden, eps)
        self.cache_config = dataclasses.replace(config, num_hidden_layers=1, layer_types=(FULL,))
        self._target = (target,)  # a tuple, so nn.Module does not adopt the target

    @property
    def target(self) -> HybridModel:
        """The model whose embedding and LM head this head shares."""
        return self._target[0]

    def new_state(self, batch_size: int = 1) -> HybridState:
        """An empty KV cache for the head's layer."""
        weight = self.fc.weight
        return HybridState(self.cache_config, batch_size, weight.dtype, weight.device)

    def forward(self, hidden: Tensor, next_ids: Tensor) -> tuple[Tensor, Tensor]:
        """Differentiable full-sequence pass from an empty cache: hidden (B, T, H) is the
        target's final hidden state at positions 0..T-1, next_ids (B, T) the tokens at
        1..T. Returns logits (B, T, V) for the tokens at 2..T+1 and the head's own normed
        hidden state (B, T, H), which stands in for the target's when chaining steps."""
        batch, length, _ = hidden.shape
        c = self.cache_config
        keys, values = (torch.zeros(batch, c.num_key_value_heads, length, c.head_dim,
                                    dtype=hidden.dtype, device=hidden.device) for _ in range(2))
        return self._run(hidden, next_ids, keys, values, 0, self.rope(0, length, hidden))

    @torch.inference_mode()
    def step(self, hidden: Tensor, next_ids: Tensor,
             state: HybridState) -> tuple[Tensor, Tensor]:
        """Like `forward` for positions state.position.. state.position+T-1, continuing
        the cache in `state` (advanced by T). Roll back a draft with `state.trim(n)`."""
        if state.config != self.cache_config or state.batch_size != hidden.shape[0]:
            raise HybridError("state was not made by this head's new_state for this batch")
        length = hidden.shape[1]
        start = state.claim(length)
        out = self._run(hidden, next_ids, state.keys[0], state.values[0], start,
                        self.rope(start, length, hidden))
        state.advance(length)
        return out

    def rope(self, start: int, length: int, like: Tensor) -> tuple[Tensor, Tensor]:
        """The head layer's rotary cos and sin for positions start..start+length-1, in
        `like`'s dtype and on its device."""
        c = self.cache_config
        return rotary_tables(start, length, c.rotary_dim, c.rope_theta, like.dtype, like.device)

    def _run(self, hidden: Tensor, next_ids: Tensor, keys: Tensor, values: Tensor,
             start: int, rope: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        if hidden.ndim != 3 or next_ids.shape != hidden.shape[:2] or hidden.shape[1] == 0:
            raise HybridError(
                f"expected hidden (B, T, H) and next_ids (B, T), got {tuple(hidden.shape)} "
                f"and {tuple(next_ids.shape)}"
            )
        target = self.target
        embedded = self.pre_fc_norm_embedding(target.embed_tokens(next_ids))
        x = self.fc(torch.cat((embedded, self.pre_fc_norm_hidden(hidden)), dim=-1))
        layer = self.layers[0]
        x = x + layer.self_attn(layer.input_layernorm(x), keys, values, start, rope)
        x = x + layer.mlp(layer.post_attention_layernorm(x))
        x = self.norm(x)
        return F.linear(x, target.output_weight), x


def load_mtp(path: str | Path, target: HybridModel | None = None,
             device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> MtpHead:
    """The MTP head stored under `mtp.` in the checkpoint at `path`, bound to `target`
    (loaded from the same directory onto `device` in `dtype` when None; the head takes its
    target's device and dtype); eval mode, no grad."""
    root = model_dir(path)
    if target is None:
        target = load_checkpoint(root, dtype=dtype, device=device).model
    head = MtpHead(target)
    weights = {}
    for file in sorted(root.glob("*.safetensors")):
        with safe_open(str(file), framework="pt", device="cpu") as handle:
            names = handle.keys()  # safe_open is not a mapping: iterate its key list
            for key in names:
                if key.startswith(PREFIX):
                    weights[key[len(PREFIX):]] = handle.get_tensor(key)
    expected = head.state_dict()
    missing = sorted(set(expected) - set(weights))
    extra = sorted(set(weights) - set(expected))
    if missing or extra:
        raise CheckpointFormatError(
            f"{root} has no usable MTP head: missing {missing[:5]}, unexpected {extra[:5]} "
            f"(expected one full-attention layer under mtp.layers.0)"
        )
    for name, tensor in weights.items():
        if tensor.shape != expected[name].shape:
            raise CheckpointFormatError(
                f"mtp.{name} has shape {tuple(tensor.shape)}, the config implies "
                f"{tuple(expected[name].shape)}"
            )
    # Built in the default dtype: move the head itself, since load_state_dict copies the
    # tensors into its existing parameters, keeping their dtype.
    head.to(device=target.embed_tokens.weight.device, dtype=target.dtype)
    head.load_state_dict(weights)
    return head.eval().requires_grad_(False)
