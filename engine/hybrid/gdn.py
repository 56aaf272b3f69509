"""The Qwen3.5 linear-attention layer (Gated DeltaNet) around the gated delta rule, whose
one torch implementation is `speckernels.reference`; what a verify keeps is the round's
`Keep`, and who computes the per-position states or replays the record is the kernel
backend each call is given (`speckernels.ops` dispatches)."""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from engine.hybrid.config import HybridConfig
from engine.hybrid.layers import GatedRMSNorm
from speckernels import ops
from speckernels.backend import KernelBackend
from speckernels.reference import chunk_gated_delta, delta_step_, l2norm, readout


@dataclass(frozen=True)
class LayerStates:
    """One GDN layer's state after each batch position (the `per_token` capture)."""

    conv: Tensor       # (B, T, C, K-1)
    recurrent: Tensor  # (B, T, Hv, Dk, Dv) fp32


@dataclass(frozen=True)
class LayerInputs:
    """One GDN layer's recurrence inputs per batch position (the `input_replay` record)."""

    q: Tensor        # (B, T, Hv, Dk) fp32, normalised and scaled
    k: Tensor        # (B, T, Hv, Dk) fp32, normalised
    v: Tensor        # (B, T, Hv, Dv) fp32
    g: Tensor        # (B, T, Hv) log-decay
    beta: Tensor     # (B, T, Hv)
    conv_in: Tensor  # (B, C, T) conv inputs before the conv


def causal_conv(window: Tensor, x: Tensor, weight: Tensor) -> tuple[Tensor, Tensor]:
    """Depthwise causal conv + SiLU of x (B, C, T) continuing from `window` (B, C, K-1),
    weight (C, 1, K). Returns the output (B, C, T) and the padded input (B, C, K-1+T)
    whose last K-1 columns are the next window."""
    full = torch.cat((window, x), dim=-1)  # (B, C, K-1+T)
    taps, length = weight.shape[-1], x.shape[-1]
    # K shifted multiply-adds: far faster than oneDNN's depthwise conv at decode sizes, and
    # each output is summed in the same order whatever T is.
    out = full[..., :length] * weight[:, :, 0]
    for i in range(1, taps):
        out = out + full[..., i:i + length] * weight[:, :, i]
    return F.silu(out), full


def replay_inputs_(conv_state: Tensor, recurrent: Tensor, inputs: LayerInputs, n: int,
                   kernels: KernelBackend) -> None:
    """Advance one layer's live conv window and recurrent state over the first `n`
    recorded positions: only the recurrence, no projections."""
    accept = torch.full((recurrent.shape[0],), n - 1, dtype=torch.long,
                        device=recurrent.device)
    ops.gdn_replay(inputs.k, inputs.v, inputs.g, inputs.beta, recurrent, accept,
                   backend=kernels)
    ops.conv_replay(inputs.conv_in, conv_state, accept, backend=kernels)


class GatedDeltaNet(nn.Module):
    """Qwen3.5 linear-attention mixer: qkv projection, causal conv, L2-normalised q/k,
    gated delta rule with grouped value heads, gated RMSNorm with z, output projection."""

    def __init__(self, config: HybridConfig) -> None:
        super().__init__()
        self.num_k_heads = config.linear_num_key_heads
        self.num_v_heads = config.linear_num_value_heads
        self.k_dim = config.linear_key_head_dim
        self.v_dim = config.linear_value_head_dim
        hidden, conv_dim = config.hidden_size, config.conv_dim
        self.in_proj_qkv = nn.Linear(hidden, conv_dim, bias=False)
        self.in_proj_z = nn.Linear(hidden, config.linear_value_dim, bias=False)
        self.in_proj_b = nn.Linear(hidden, self.num_v_heads, bias=False)
        self.in_proj_a = nn.Linear(hidden, self.num_v_heads, bias=False)
        # Only the weight (C, 1, K) is used; Conv1d keeps the checkpoint's parameter name.
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, config.linear_conv_kernel_dim,
                                groups=conv_dim, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(self.num_v_heads))
        self.A_log = nn.Parameter(torch.zeros(self.num_v_heads))
        self.norm = GatedRMSNorm(self.v_dim, config.rms_norm_eps)
        self.out_proj = nn.Linear(config.linear_value_dim, hidden, bias=False)

    def forward(self, x: Tensor, conv_state: Tensor, recurrent: Tensor, *, write: bool
                ) -> Tensor:
        """Mix x (B, T, hidden) from the conv window (B, C, K-1) and recurrent state
        (B, Hv, Dk, Dv), advancing them when `write`. The path of training (a shared zero
        state, nothing written) and the compiled decode step; serving forwards run packed
        (`engine.hybrid.packed`)."""
        mixed = self.in_proj_qkv(x).transpose(1, 2)  # (B, C, T)
        conv_out, full = causal_conv(conv_state, mixed, self.conv1d.weight)
        q, k, v, g, beta = self.recurrence_inputs(x, conv_out)
        if x.shape[1] == 1:
            final = recurrent if write else recurrent.clone()
            delta_step_(final, k[:, 0], v[:, 0], g[:, 0], beta[:, 0])
            core = readout(q[:, 0], final).unsqueeze(1)  # (B, 1, Hv, Dv)
        else:
            core, final = chunk_gated_delta(q, k, v, g, beta, recurrent)
        if write:
            if final is not recurrent:
                recurrent.copy_(final)
            conv_state.copy_(full[..., -conv_state.shape[-1]:])
        return self.output(x, core)

    def output(self, x: Tensor, core: Tensor) -> Tensor:
        """The gated, normed output projection (B, T, hidden) of the recurrence's readout
        core (B, T, Hv, Dv) for x (B, T, hidden)."""
        batch, length, _ = x.shape
        z = self.in_proj_z(x).reshape(batch, length, self.num_v_heads, self.v_dim)
        out = self.norm(core.to(x.dtype), z).reshape(batch, length, -1)
        return self.out_proj(out)

    def recurrence_inputs(self, x: Tensor, conv_out: Tensor) -> tuple[Tensor, ...]:
        """From x (B, T, hidden) and its conv output (B, C, T): q, k (B, T, Hv, Dk),
        v (B, T, Hv, Dv), g and beta (B, T, Hv), all fp32."""
        batch, length, _ = x.shape
        key_width = self.num_k_heads * self.k_dim
        q, k, v = conv_out.transpose(1, 2).split(
            (key_width, key_width, self.num_v_heads * self.v_dim), dim=-1)
        q = l2norm(q.reshape(batch, length, self.num_k_heads, self.k_dim).float())
        q = q * self.k_dim**-0.5
        k = l2norm(k.reshape(batch, length, self.num_k_heads, self.k_dim).float())
        group = self.num_v_heads // self.num_k_heads
        if group > 1:  # each q/k head serves `group` consecutive value heads
            q, k = q.repeat_interleave(group, dim=2), k.repeat_interleave(group, dim=2)
        v = v.reshape(batch, length, self.num_v_heads, self.v_dim).float()
        beta = self.in_proj_b(x).float().sigmoid()
        # Computed in fp32: in half precision exp(A_log) can overflow to inf.
        decay_rate = F.softplus(self.in_proj_a(x).float() + self.dt_bias.float())
        g = -self.A_log.float().exp() * decay_rate
        return q, k, v, g, beta
