"""Gated DeltaNet: the gated delta rule in torch (chunked and recurrent forms, the swappable
kernel surface) and the Qwen3.5 linear-attention layer built on it.

Recurrence per value head, with S (Dk, Dv) in fp32:
    S <- exp(g) * S;  S <- S + k ⊗ beta * (v - kᵀS);  o = qᵀS
"""

from dataclasses import dataclass
from enum import StrEnum

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from engine.hybrid.config import HybridConfig
from engine.hybrid.layers import GatedRMSNorm
from kernels.backend import KernelBackend


class Mode(StrEnum):
    """What a forward keeps of the recurrent layers, by rollback strategy."""

    COMMIT = "commit"        # advance the live state through the whole batch
    PER_TOKEN = "per_token"  # advance it and keep the state after every position
    RECORD = "record"        # leave it untouched; record the recurrence inputs


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


def l2norm(x: Tensor, eps: float = 1e-6) -> Tensor:
    """x / sqrt(sum(x²) + eps) over the last dim (eps inside the root, as FLA does)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


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


def delta_step_(state: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor) -> None:
    """Advance `state` (B, H, Dk, Dv) in place by one position: k (B, H, Dk), v (B, H, Dv),
    g and beta (B, H). Decode, per-token capture and replay all call this one function,
    so the same inputs give the same bits whichever path ran them."""
    k, v = k.contiguous(), v.contiguous()
    state.mul_(g.exp()[..., None, None])
    predicted = (k.unsqueeze(-2) @ state).squeeze(-2)  # (B, H, Dv)
    delta = (v - predicted) * beta.unsqueeze(-1)
    state.addcmul_(k.unsqueeze(-1), delta.unsqueeze(-2))


def readout(q: Tensor, state: Tensor) -> Tensor:
    """qᵀS: q (B, H, Dk), state (B, H, Dk, Dv) -> (B, H, Dv)."""
    return (q.contiguous().unsqueeze(-2) @ state).squeeze(-2)


def delta_states(state: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor) -> Tensor:
    """The state after each position, (B, T, H, Dk, Dv), stepping from a copy of `state`."""
    batch, length = k.shape[:2]
    work = state.clone()
    out = state.new_empty(batch, length, *state.shape[1:])
    ks, vs = by_position(k), by_position(v)
    for t in range(length):
        delta_step_(work, ks[t], vs[t], g[:, t], beta[:, t])
        out[:, t] = work
    return out


def by_position(x: Tensor) -> Tensor:
    """(B, T, ...) -> (T, B, ...) contiguous: one copy up front, so that each step's slice
    is already contiguous and `delta_step_` copies nothing (the values are the same bits)."""
    return x.transpose(0, 1).contiguous()


def chunk_gated_delta(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state: Tensor,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor]:
    """Chunked (parallel) gated delta rule over T positions from `state` (not modified).
    q, k (B, T, H, Dk); v (B, T, H, Dv); g, beta (B, T, H). Returns the outputs
    (B, T, H, Dv) and the final state (B, H, Dk, Dv). Within a chunk the T sequential
    rank-1 updates become one unit-lower-triangular solve (the UT transform)."""
    length, dk, dv = k.shape[1], k.shape[-1], v.shape[-1]
    size = min(chunk_size, length)
    pad = (-length) % size
    # Padded positions have k = 0 and g = 0: they neither write nor decay the state.
    q, k, v = (F.pad(x.transpose(1, 2), (0, 0, 0, pad)) for x in (q, k, v))  # (B, H, T', D)
    g, beta = (F.pad(x.transpose(1, 2), (0, pad)) for x in (g, beta))  # (B, H, T')
    batch, heads = q.shape[:2]
    q, k, v = (x.reshape(batch, heads, -1, size, x.shape[-1]) for x in (q, k, v))  # (B,H,N,C,D)
    g, beta = (x.reshape(batch, heads, -1, size) for x in (g, beta))  # (B, H, N, C)

    g_cum = g.cumsum(-1)
    causal = torch.ones(size, size, dtype=torch.bool, device=q.device).tril()
    # Mask before exp: above the diagonal the difference is positive and could overflow.
    decay = (g_cum[..., :, None] - g_cum[..., None, :]).masked_fill(~causal, -torch.inf).exp()
    k_beta = k * beta[..., None]
    system = (k_beta @ k.transpose(-1, -2)) * decay  # (B, H, N, C, C); diagonal ignored
    rhs = torch.cat((v * beta[..., None], k_beta * g_cum.exp()[..., None]), dim=-1)
    solved = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)
    new_values, decayed_keys = solved.split((dv, dk), dim=-1)  # (B,H,N,C,Dv), (B,H,N,C,Dk)

    intra = (q @ k.transpose(-1, -2)) * decay  # (B, H, N, C, C)
    q_decayed = q * g_cum.exp()[..., None]
    k_to_end = k * (g_cum[..., -1:] - g_cum).exp()[..., None]
    chunk_decay = g_cum[..., -1].exp()[..., None, None]  # (B, H, N, 1, 1)

    s = state
    out = torch.empty_like(new_values)
    for i in range(q.shape[2]):
        v_new = new_values[:, :, i] - decayed_keys[:, :, i] @ s  # (B, H, C, Dv)
        out[:, :, i] = q_decayed[:, :, i] @ s + intra[:, :, i] @ v_new
        s = s * chunk_decay[:, :, i] + k_to_end[:, :, i].transpose(-1, -2) @ v_new
    out = out.reshape(batch, heads, -1, dv)[:, :, :length].transpose(1, 2)  # (B, T, H, Dv)
    return out, s


def replay_inputs_(conv_state: Tensor, recurrent: Tensor, inputs: LayerInputs, n: int,
                   kernels: KernelBackend = KernelBackend.TORCH) -> None:
    """Advance one layer's live conv window and recurrent state over the first `n`
    recorded positions: only the recurrence, no projections."""
    if kernels is KernelBackend.TRITON:
        from kernels import ops

        accept = torch.full((recurrent.shape[0],), n - 1, dtype=torch.long,
                            device=recurrent.device)
        ops.gdn_replay(inputs.k, inputs.v, inputs.g, inputs.beta, recurrent, accept,
                       backend=kernels)
        ops.conv_replay(inputs.conv_in, conv_state, accept, backend=kernels)
        return
    ks, vs = by_position(inputs.k[:, :n]), by_position(inputs.v[:, :n])
    for t in range(n):
        delta_step_(recurrent, ks[t], vs[t], inputs.g[:, t], inputs.beta[:, t])
    width = conv_state.shape[-1]
    conv_state.copy_(torch.cat((conv_state, inputs.conv_in[..., :n]), dim=-1)[..., -width:])


class GatedDeltaNet(nn.Module):
    """Qwen3.5 linear-attention mixer: qkv projection, causal conv, L2-normalised q/k,
    gated delta rule with grouped value heads, gated RMSNorm with z, output projection.
    `kernels` chooses who computes the per-position states of a `per_token` verify: the
    torch reference (stepped, bit-identical to replay) or the project's Triton kernel."""

    kernels: KernelBackend = KernelBackend.TORCH

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

    def forward(
        self, x: Tensor, conv_state: Tensor, recurrent: Tensor, mode: Mode,
    ) -> tuple[Tensor, LayerStates | LayerInputs | None]:
        """Mix x (B, T, hidden) from the live conv window (B, C, K-1) and recurrent state
        (B, Hv, Dk, Dv); `mode` says whether they advance and what is kept."""
        batch, length, _ = x.shape
        mixed = self.in_proj_qkv(x).transpose(1, 2)  # (B, C, T)
        conv_out, full = causal_conv(conv_state, mixed, self.conv1d.weight)
        q, k, v, g, beta = self._recurrence_inputs(x, conv_out)
        if length == 1:
            final = recurrent if mode is Mode.COMMIT else recurrent.clone()
            delta_step_(final, k[:, 0], v[:, 0], g[:, 0], beta[:, 0])
            core = readout(q[:, 0], final).unsqueeze(1)  # (B, 1, Hv, Dv)
        else:
            core, final = chunk_gated_delta(q, k, v, g, beta, recurrent)

        trace: LayerStates | LayerInputs | None = None
        if mode is Mode.RECORD:
            trace = LayerInputs(q=q, k=k, v=v, g=g, beta=beta, conv_in=mixed)
        else:
            if mode is Mode.PER_TOKEN:
                # Stepped, not read off the chunked form: replay steps the same way, so
                # select(j) and replay(j + 1) give bit-identical states.
                if length == 1:
                    states = final.unsqueeze(1)
                elif self.kernels is KernelBackend.TRITON:
                    from kernels import ops

                    _, states = ops.gdn_verify(q, k, v, g, beta, recurrent, scale=1.0,
                                               backend=self.kernels)
                else:
                    states = delta_states(recurrent, k, v, g, beta)
                width = conv_state.shape[-1]
                windows = full.unfold(-1, width, 1)[:, :, 1:].transpose(1, 2)  # (B,T,C,K-1)
                trace = LayerStates(conv=windows, recurrent=states)
                final = states[:, -1]
            if final is not recurrent:
                recurrent.copy_(final)
            conv_state.copy_(full[..., -conv_state.shape[-1]:])

        z = self.in_proj_z(x).reshape(batch, length, self.num_v_heads, self.v_dim)
        out = self.norm(core.to(x.dtype), z).reshape(batch, length, -1)
        return self.out_proj(out), trace

    def _recurrence_inputs(self, x: Tensor, conv_out: Tensor) -> tuple[Tensor, ...]:
        """q, k (B, T, Hv, Dk), v (B, T, Hv, Dv), g and beta (B, T, Hv), all fp32."""
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
