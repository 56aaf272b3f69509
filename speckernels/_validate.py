"""Argument checks and layout helpers shared by the ops in ``speckernels.ops`` (torch only)."""

from __future__ import annotations

import torch


def indices(idx: torch.Tensor | None, batch: int, device: torch.device, name: str) -> torch.Tensor:
    """A (B,) int32 tensor on ``device``; None means 0..B-1."""
    if idx is None:
        return torch.arange(batch, device=device, dtype=torch.int32)
    idx = torch.as_tensor(idx, device=device)
    if idx.shape != (batch,) or idx.dtype.is_floating_point:
        raise ValueError(f"{name} must be a ({batch},) integer tensor, got {tuple(idx.shape)}")
    return idx.to(torch.int32).contiguous()


def unit_last(x: torch.Tensor) -> torch.Tensor:
    """The kernels index the last dim with unit stride; copy only when it is not."""
    return x if x.stride(-1) == 1 else x.contiguous()


def dense_tail(x: torch.Tensor, dims: int) -> bool:
    """True when the last ``dims`` dims of x form one contiguous block."""
    expected = 1
    for size, stride in zip(reversed(x.shape[-dims:]), reversed(x.stride()[-dims:]), strict=True):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def check_gdn(k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
               state: torch.Tensor) -> None:  # fmt: skip
    """Shape agreement of the recurrence inputs with the state pool."""
    bsz, seq, heads, kdim = k.shape
    hv, vdim = v.shape[2], v.shape[3]
    if v.shape[:2] != (bsz, seq) or g.shape != (bsz, seq, hv) or beta.shape != (bsz, seq, hv):
        raise ValueError("expected k (B,T,H,K), v (B,T,HV,V), g and beta (B,T,HV)")
    if seq < 1 or hv % heads != 0:
        raise ValueError(f"need T >= 1 and HV ({hv}) a multiple of H ({heads})")
    if state.dim() != 4 or state.shape[1:] != (hv, kdim, vdim):
        raise ValueError(f"state must be (N, {hv}, {kdim}, {vdim}), got {tuple(state.shape)}")


def check_conv(x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor) -> None:
    """Shape agreement of conv inputs, window pool and depthwise weight."""
    if x.dim() != 3 or conv_state.dim() != 3 or weight.dim() != 2:
        raise ValueError("expected x (B, C, T), conv_state (N, C, S), weight (C, KW)")
    channels, taps = weight.shape
    if x.shape[1] != channels or conv_state.shape[1] != channels:
        raise ValueError("channel counts of x, conv_state and weight differ")
    if conv_state.shape[2] < taps - 1 or x.shape[2] < 1:
        raise ValueError(f"need a window of at least KW-1 = {taps - 1} inputs and T >= 1")


def layer_stacked(
    state: torch.Tensor,
    intermediate: torch.Tensor,
    conv_state: torch.Tensor | None,
    conv_intermediate: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Commit operands with a leading layer dim L (a view, L = 1 for per-layer tensors).

    Accepts state (N, HV, K, V) / (L, N, HV, K, V) with one more dim (T) on intermediate,
    and the conv pair (N, C, S) / (L, N, C, S) layered the same way.
    """
    layered = state.dim() == 5
    if state.dim() not in (4, 5) or intermediate.dim() != state.dim() + 1:
        raise ValueError("expected state (N,HV,K,V) or (L,N,HV,K,V), intermediate with T added")
    if (conv_state is None) != (conv_intermediate is None):
        raise ValueError("conv_state and conv_intermediate go together")
    if not layered:
        state, intermediate = state.unsqueeze(0), intermediate.unsqueeze(0)
    if intermediate.shape[3:] != state.shape[2:] or intermediate.shape[0] != state.shape[0]:
        raise ValueError("intermediate rows must match state rows")
    if conv_state is not None:
        if conv_state.dim() != 3 + layered or conv_intermediate.dim() != conv_state.dim() + 1:
            raise ValueError("conv tensors must be layered exactly like the recurrent ones")
        if not layered:
            conv_state, conv_intermediate = conv_state.unsqueeze(0), conv_intermediate.unsqueeze(0)
        if conv_intermediate.shape[0] != conv_state.shape[0] or (
            conv_intermediate.shape[1] != intermediate.shape[1]
            or conv_intermediate.shape[3:] != conv_state.shape[2:]
        ):
            raise ValueError("conv_intermediate rows must match conv_state rows and the batch")
    return state, intermediate, conv_state, conv_intermediate
