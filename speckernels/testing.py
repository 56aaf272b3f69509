"""Helpers the kernel tests and the GPU benchmark share: poisoning and relative error."""

from __future__ import annotations

import torch


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill t with NaN (or the dtype's minimum for integers) so an unwritten element shows."""
    if t.dtype.is_floating_point:
        return t.fill_(float("nan"))
    return t.fill_(torch.iinfo(t.dtype).min)


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; inf when out holds a NaN or inf, 0 for 0 == 0."""
    out64, ref64 = out.detach().double(), ref.detach().double()
    if not torch.isfinite(out64).all():
        return float("inf")
    num = torch.linalg.vector_norm(out64 - ref64).item()
    den = torch.linalg.vector_norm(ref64).item()
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den
