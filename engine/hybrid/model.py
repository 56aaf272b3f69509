"""`HybridModel`: the Qwen3.5 text decoder (Gated DeltaNet and gated attention layers,
each followed by a SwiGLU MLP). Serving runs one packed forward (`engine.hybrid.rows`):
`forward` advances a state (prefill, replay, drafts), `verify_rows` runs the rounds'
verify batches, one row per sequence, keeping what each round asks (`Keep`: every
intermediate GDN state, or the GDN inputs with the GDN state left alone, or nothing); a
sequential round is one row. Training runs `train_logits`, differentiable, over scratch
buffers."""

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from engine.backend import Keep
from engine.hybrid.attention import GatedAttention
from engine.hybrid.config import LINEAR, HybridConfig
from engine.hybrid.errors import HybridError
from engine.hybrid.gdn import GatedDeltaNet
from engine.hybrid.layers import SwiGLU, ZeroCentredRMSNorm, rotary_positions, rotary_tables
from engine.hybrid.packed import attention_rows, gdn_rows
from engine.hybrid.pool import StatePool
from engine.hybrid.rows import Kept, Rows, Trace, claim_rows, state_rows
from engine.hybrid.state import HybridState
from speckernels.backend import KernelBackend


class DecoderLayer(nn.Module):
    """Pre-norm residual block: token mixer (GDN or attention), then MLP."""

    def __init__(self, config: HybridConfig, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.input_layernorm = ZeroCentredRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = ZeroCentredRMSNorm(config.hidden_size,
                                                           config.rms_norm_eps)
        self.mlp = SwiGLU(config.hidden_size, config.intermediate_size)
        if kind == LINEAR:
            self.linear_attn = GatedDeltaNet(config)
        else:
            self.self_attn = GatedAttention(config)


class HybridModel(nn.Module):
    """Qwen3.5-style hybrid causal LM; parameter names match HF's `Qwen3_5ForCausalLM`
    without its `model.` prefix."""

    def __init__(self, config: HybridConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, kind) for kind in config.layer_types)
        self.norm = ZeroCentredRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = (None if config.tie_word_embeddings
                        else nn.Linear(config.hidden_size, config.vocab_size, bias=False))
        # Index of each layer's entry in the state's GDN lists or KV lists.
        kinds = config.layer_types
        self._slots = [sum(k == kind for k in kinds[:i]) for i, kind in enumerate(kinds)]
        # The pool every single-sequence state's row lives in, per dtype and device.
        self._pools: dict[tuple[torch.dtype, torch.device], StatePool] = {}

    @property
    def dtype(self) -> torch.dtype:
        """Parameter dtype (also the dtype of KV and conv state)."""
        return self.embed_tokens.weight.dtype

    def new_state(self, batch_size: int = 1) -> HybridState:
        """An empty state (position 0) on the model's device and dtype; a single
        sequence's state (GDN and KV) is a row of the model's pool."""
        key = (self.dtype, self.embed_tokens.weight.device)
        pool = self._pools.get(key) if batch_size == 1 else None
        if batch_size == 1 and pool is None:
            pool = self._pools[key] = StatePool(self.config, *key)
        return HybridState(self.config, batch_size, *key, pool=pool)

    @torch.inference_mode()
    def forward(
        self, input_ids: Tensor, state: HybridState | None = None, *, last_only: bool = False,
    ) -> Tensor:
        """Logits (B, T, V) for input_ids (B, T) continuing from `state` (batch size B),
        which advances by T (a fresh state when None): the packed forward with each batch
        entry a row, keeping nothing. `last_only` computes logits for the last position
        only (B, 1, V)."""
        if input_ids.ndim != 2 or input_ids.shape[1] == 0:
            raise HybridError(f"input_ids must be (batch, length >= 1), got {input_ids.shape}")
        batch = input_ids.shape[0]
        rows = state_rows(self.config, self.new_state(batch) if state is None else state,
                          input_ids)
        hidden, _ = self._packed(rows, KernelBackend.TORCH)  # (1, N, hidden)
        if last_only:
            hidden = hidden[:, rows.last_tokens]  # (1, B, hidden)
        logits = F.linear(self.norm(hidden), self.output_weight)  # (1, N, V)
        return logits.view(batch, -1, logits.shape[-1])

    def verify(
        self, input_ids: Tensor, state: HybridState, keep: Keep,
        kernels: KernelBackend = KernelBackend.TORCH,
    ) -> tuple[Tensor, Kept]:
        """`verify_rows` of one row, input_ids (1, T): logits (T, V) and what `keep`
        asks: PER_TOKEN, every GDN layer's state after each position (computed by
        `kernels`; commit with `state.select`); INPUTS, the GDN inputs, the state left as
        it was but for KV entries past `position` (commit with `state.replay_inputs`);
        NOTHING, as `forward`."""
        if input_ids.ndim != 2 or input_ids.shape[0] != 1:
            raise HybridError(f"input_ids must be (1, length), got {tuple(input_ids.shape)}")
        logits, kept = self.verify_rows([input_ids[0].tolist()], [state], [keep], kernels)
        return logits, kept[0]

    @torch.inference_mode()
    def verify_rows(
        self, batches: Sequence[Sequence[int]], states: Sequence[HybridState],
        keeps: Sequence[Keep], kernels: KernelBackend = KernelBackend.TORCH,
    ) -> tuple[Tensor, list[Kept]]:
        """Several sequences' verify batches in one packed forward (`engine.hybrid.rows`):
        row b is `batches[b]` from `states[b]` (batch size 1, each at its own position),
        keeping `keeps[b]`. Logits (N, V) packed, row b's at the offsets where the lengths
        before it end, and per row what it keeps; each state is left as a verify of its
        row alone leaves it."""
        rows = claim_rows(self.config, states, batches, keeps,
                          self.embed_tokens.weight.device)
        hidden, kept = self._packed(rows, kernels)
        return F.linear(self.norm(hidden), self.output_weight)[0], kept

    def _packed(self, rows: Rows, kernels: KernelBackend) -> tuple[Tensor, list[Kept]]:
        """Every decoder layer over the rows' packed tokens: the hidden states
        (1, N, hidden) before the final norm, and per row what it keeps."""
        rope = None
        if self.config.layer_types.count(LINEAR) < len(self.config.layer_types):
            rope = rotary_positions(rows.positions, self.config.rotary_dim,
                                    self.config.rope_theta, self.dtype)
        hidden = self.embed_tokens(rows.ids)  # (1, N, hidden)
        traces: list[list[Trace]] = []
        for layer, slot in zip(self.layers, self._slots, strict=True):
            mixed = layer.input_layernorm(hidden)
            if layer.kind == LINEAR:
                mixed, trace = gdn_rows(layer.linear_attn, mixed, rows, slot, kernels)
                traces.append(trace)
            else:
                mixed = attention_rows(layer.self_attn, mixed, rows, slot, rope)
            hidden = hidden + mixed
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
        rows.advance()
        return hidden, rows.kept(traces)

    @property
    def output_weight(self) -> Tensor:
        """The LM head's weight (V, hidden): the embedding when tied."""
        return self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def train_logits(self, input_ids: Tensor) -> tuple[Tensor, Tensor]:
        """Logits (B, T, V) and final-normed hidden states (B, T, hidden) of input_ids from
        an empty state, differentiable (for training; serving goes through `forward`).
        Runs the chunked GDN form from zero state writing nothing back (so
        autograd's saved tensors stay valid) and attention over scratch KV buffers, never a
        `HybridState`, whose inference tensors autograd cannot use."""
        if input_ids.ndim != 2 or input_ids.shape[1] < 2:
            raise HybridError(f"input_ids must be (batch, length >= 2), got {input_ids.shape}")
        batch, length = input_ids.shape
        c, device = self.config, input_ids.device
        n_full = sum(kind != LINEAR for kind in c.layer_types)
        n_linear = c.num_hidden_layers - n_full
        # Recording only reads these, so every GDN layer can share one pair.
        conv = [torch.zeros(batch, c.conv_dim, c.linear_conv_kernel_dim - 1, dtype=self.dtype,
                            device=device)] * n_linear
        recurrent = [torch.zeros(batch, c.linear_num_value_heads, c.linear_key_head_dim,
                                 c.linear_value_head_dim, device=device)] * n_linear
        kv = [torch.zeros(batch, c.num_key_value_heads, length, c.head_dim, dtype=self.dtype,
                          device=device) for _ in range(2 * n_full)]
        rope = rotary_tables(0, length, c.rotary_dim, c.rope_theta, self.dtype, device)
        hidden = self._stack(self.embed_tokens(input_ids), conv, recurrent, kv[:n_full],
                             kv[n_full:], 0, rope, write=False)
        hidden = self.norm(hidden)
        return F.linear(hidden, self.output_weight), hidden

    def _stack(
        self, hidden: Tensor, conv: list[Tensor], recurrent: list[Tensor], keys: list[Tensor],
        values: list[Tensor], start: int, rope: tuple[Tensor, Tensor] | None, *, write: bool,
    ) -> Tensor:
        """Run every decoder layer over hidden (B, T, hidden), reading the given per-layer
        buffers and writing the GDN state back when `write`."""
        for layer, slot in zip(self.layers, self._slots, strict=True):
            mixed = layer.input_layernorm(hidden)
            if layer.kind == LINEAR:
                mixed = layer.linear_attn(mixed, conv[slot], recurrent[slot], write=write)
            else:
                mixed = layer.self_attn(mixed, keys[slot], values[slot], start, rope)
            hidden = hidden + mixed
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
        return hidden
