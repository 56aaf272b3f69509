"""Qwen3.5 gated full attention: the query projection carries a per-head output gate,
q and k get a per-head zero-centred RMSNorm, RoPE rotates a leading fraction of each head,
and key/value heads are shared by groups of query heads (GQA)."""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from engine.hybrid.config import HybridConfig
from engine.hybrid.layers import ZeroCentredRMSNorm, apply_rotary


class GatedAttention(nn.Module):
    """Causal self-attention over a KV cache, output gated by sigmoid(gate)."""

    def __init__(self, config: HybridConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        hidden, bias = config.hidden_size, config.attention_bias
        self.q_proj = nn.Linear(hidden, self.num_heads * self.head_dim * 2, bias=bias)
        self.k_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, self.num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, hidden, bias=bias)
        self.q_norm = ZeroCentredRMSNorm(self.head_dim, config.rms_norm_eps)
        self.k_norm = ZeroCentredRMSNorm(self.head_dim, config.rms_norm_eps)

    def forward(
        self, x: Tensor, keys: Tensor, values: Tensor, start: int, rope: tuple[Tensor, Tensor],
    ) -> Tensor:
        """Attend x (B, T, hidden) at positions start..start+T-1. The new keys and values
        are written into the cache buffers `keys`/`values` (B, Hkv, capacity, D) at those
        positions; entries before `start` are the context."""
        query, gate, key, value = self.project(x, rope)
        return self.output(self.attend(query, key, value, keys, values, start), gate)

    def project(self, x: Tensor, rope: tuple[Tensor, Tensor]) -> tuple[Tensor, ...]:
        """Rotated query (B, H, T, D), gate (B, T, H * D), rotated key and value
        (B, Hkv, T, D) of x (B, T, hidden); rope's cos and sin (T, R), or (B, 1, T, R)
        where each row starts at its own position."""
        batch, length, _ = x.shape
        # Each head's q_proj slice is [query | gate], hence the view before the split.
        query, gate = self.q_proj(x).view(batch, length, self.num_heads, 2 * self.head_dim).chunk(
            2, dim=-1)
        query = self.q_norm(query).transpose(1, 2)  # (B, H, T, D)
        key = self.k_norm(self.k_proj(x).view(batch, length, self.num_kv_heads, self.head_dim))
        key = key.transpose(1, 2)  # (B, Hkv, T, D)
        value = self.v_proj(x).view(batch, length, self.num_kv_heads, self.head_dim)
        cos, sin = rope
        query, key = apply_rotary(query, cos, sin), apply_rotary(key, cos, sin)
        return query, gate.reshape(batch, length, -1), key, value.transpose(1, 2)

    def attend(self, query: Tensor, key: Tensor, value: Tensor, keys: Tensor, values: Tensor,
               start: int) -> Tensor:
        """Write key/value (B, Hkv, T, D) into the cache buffers (B, Hkv, capacity, D) at
        start..start+T-1 and attend query (B, H, T, D) over entries 0..start+T-1, causally;
        the output (B, T, H * D)."""
        batch, _, length, _ = query.shape
        end = start + length
        keys[:, :, start:end] = key
        values[:, :, start:end] = value
        context_k, context_v = keys[:, :, :end], values[:, :, :end]  # (B, Hkv, L, D)
        mask = None
        if length > 1 and start > 0:
            # Query i sits at position start+i and sees keys 0..start+i.
            mask = torch.ones(length, end, dtype=torch.bool, device=query.device).tril(start)
        out = F.scaled_dot_product_attention(
            query, context_k, context_v, attn_mask=mask,
            is_causal=length > 1 and start == 0, enable_gqa=self.num_heads != self.num_kv_heads,
        )  # (B, H, T, D)
        return out.transpose(1, 2).reshape(batch, length, -1)

    def output(self, attended: Tensor, gate: Tensor) -> Tensor:
        """The gated output projection of attended (B, T, H * D) (B, T, hidden)."""
        return self.o_proj(attended * torch.sigmoid(gate))
