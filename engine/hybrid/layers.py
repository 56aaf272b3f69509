"""Small building blocks shared by both mixer kinds: norms, the SwiGLU MLP and partial
rotary position embedding. Parameter names follow the HF checkpoint layout."""

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class ZeroCentredRMSNorm(nn.Module):
    """RMSNorm whose stored weight is an offset from 1 (`x̂ * (1 + w)`), as Qwen3.5 saves it;
    computed in fp32 and cast back after scaling."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        """Normalise over the last dim."""
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * (1.0 + self.weight.float())).type_as(x)


class GatedRMSNorm(nn.Module):
    """The GDN output norm: RMSNorm with a plain (not offset) weight, then a SiLU gate."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor, gate: Tensor) -> Tensor:
        """Normalise `x` over the last dim and multiply by silu(`gate`)."""
        dtype = x.dtype
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        # Cast before the weight (as the reference does) so low-precision runs match it.
        out = self.weight * xf.to(dtype)
        return (out * F.silu(gate.float())).to(dtype)


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x))."""

    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the MLP to (..., hidden)."""
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


@functools.lru_cache(maxsize=16)
def _inverse_frequencies(rotary_dim: int, theta: float, device: torch.device) -> Tensor:
    with torch.inference_mode():
        exponents = torch.arange(0, rotary_dim, 2, dtype=torch.float, device=device) / rotary_dim
        return 1.0 / theta**exponents


def rotary_tables(
    start: int, length: int, rotary_dim: int, theta: float, dtype: torch.dtype,
    device: torch.device,
) -> tuple[Tensor, Tensor]:
    """cos and sin, each (T, rotary_dim), for positions start..start+length-1."""
    positions = torch.arange(start, start + length, device=device)
    return rotary_positions(positions, rotary_dim, theta, dtype)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate the leading `rotary_dim` dims of x (B, H, T, D) in half-split layout; the
    remaining dims pass through unchanged."""
    rotary_dim = cos.shape[-1]
    x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
    half = rotary_dim // 2
    rotated = torch.cat((-x_rot[..., half:], x_rot[..., :half]), dim=-1)
    return torch.cat((x_rot * cos + rotated * sin, x_pass), dim=-1)


def rotary_positions(positions: Tensor, rotary_dim: int, theta: float, dtype: torch.dtype
                     ) -> tuple[Tensor, Tensor]:
    """cos and sin, each (N, rotary_dim), for the token positions (N,) of a packed
    forward; a run start..start+T-1 gives `rotary_tables(start, T, ...)`'s values."""
    inv_freq = _inverse_frequencies(rotary_dim, theta, positions.device)
    freqs = positions.float()[:, None] * inv_freq[None, :]  # (N, rotary_dim / 2)
    angles = torch.cat((freqs, freqs), dim=-1)  # (N, rotary_dim)
    return angles.cos().to(dtype), angles.sin().to(dtype)
