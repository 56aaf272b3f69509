"""Triton kernel: replay the gated delta rule over the accepted prefix of recorded inputs.

The ``input_replay`` strategy keeps (k, v, g, beta) of every verified position instead of
states. Commit then advances the live state over positions 0..accept_idx[b] only; the trip
count is read on device, so one launch serves rows with different acceptance. q and the
outputs are not touched: the state never depends on them, which is why replay is cheaper
than the ``checkpoint`` strategy's restore plus forward.

Imports triton at module import: load it only through ``speckernels.ops``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from speckernels._reduce import fsum
from speckernels.gdn_verify import default_block_v


@triton.jit
def _gdn_replay_kernel(
    k, v, g, beta, state, accept, slots,
    sk_b, sk_t, sk_h, sv_b, sv_t, sv_h, sg_b, sg_t, sbt_b, sbt_t,
    ss_n, ss_h, eps,
    HV: tl.constexpr, GROUP: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BK: tl.constexpr, BV: tl.constexpr, L2NORM: tl.constexpr,
):  # fmt: skip
    i_v = tl.program_id(0)
    i_bh = tl.program_id(1)
    b = (i_bh // HV).to(tl.int64)
    hv = (i_bh % HV).to(tl.int64)
    h = hv // GROUP
    last = tl.load(accept + b).to(tl.int32)
    if last >= 0:
        o_k = tl.arange(0, BK)
        o_v = i_v * BV + tl.arange(0, BV)
        m_k = o_k < K
        m_v = o_v < V
        m_kv = m_k[:, None] & m_v[None, :]
        slot = tl.load(slots + b).to(tl.int64)
        p_state = state + slot * ss_n + hv * ss_h + o_k[:, None] * V + o_v[None, :]
        s = tl.load(p_state, mask=m_kv, other=0.0).to(tl.float32)
        p_k = k + b * sk_b + h * sk_h + o_k
        p_v = v + b * sv_b + hv * sv_h + o_v
        p_g = g + b * sg_b + hv
        p_beta = beta + b * sbt_b + hv
        for _ in range(0, last + 1):
            b_k = tl.load(p_k, mask=m_k, other=0.0).to(tl.float32)
            b_v = tl.load(p_v, mask=m_v, other=0.0).to(tl.float32)
            b_g = tl.load(p_g).to(tl.float32)
            b_beta = tl.load(p_beta).to(tl.float32)
            if L2NORM:
                b_k = b_k * (1.0 / tl.sqrt(fsum(b_k * b_k) + eps))
            s = s * tl.exp(b_g)
            kv_mem = fsum(s * b_k[:, None], 0)  # (BV,)
            delta = (b_v - kv_mem) * b_beta
            s = s + b_k[:, None] * delta[None, :]
            p_k += sk_t
            p_v += sv_t
            p_g += sg_t
            p_beta += sbt_t
        # Same tile and layout as the load: in-place write-back needs no barrier.
        tl.store(p_state, s.to(p_state.dtype.element_ty), mask=m_kv)


def gdn_replay_triton(
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    accept_idx: torch.Tensor,
    state_indices: torch.Tensor,
    *,
    use_qk_l2norm: bool,
    eps: float,
    block_v: int | None = None,
    num_warps: int = 1,
) -> None:
    """Launch the replay kernel; arguments already validated by ``speckernels.ops.gdn_replay``.

    k (B, T, H, K), v (B, T, HV, V), g and beta (B, T, HV), state (N, HV, K, V) with the
    stride rules of ``gdn_verify_triton``; accept_idx and state_indices (B,) integers.
    """
    bsz, _, heads, kdim = k.shape
    hv, vdim = v.shape[2], v.shape[3]
    bv = min(block_v or default_block_v(v), triton.next_power_of_2(vdim))
    grid = (triton.cdiv(vdim, bv), bsz * hv)
    _gdn_replay_kernel[grid](
        k, v, g, beta, state, accept_idx, state_indices,
        k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
        g.stride(0), g.stride(1), beta.stride(0), beta.stride(1),
        state.stride(0), state.stride(1), eps,
        HV=hv, GROUP=hv // heads, K=kdim, V=vdim,
        BK=triton.next_power_of_2(kdim), BV=bv, L2NORM=use_qk_l2norm,
        num_warps=num_warps,
    )  # fmt: skip
