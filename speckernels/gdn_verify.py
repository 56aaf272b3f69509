"""Triton kernel: gated delta rule over a verify batch, keeping the state after every position.

One program owns a (K, BV) tile of one (sequence, value head) state in registers and walks
the T positions; the tile never leaves registers between positions, so the per-position
states cost only their stores. The final state is written only when COMMIT is set, into
slot dst_slots[b]: the sequence's own slot (plain decode), or a spare one (``input_replay``
ping-pong: a full accept then commits by swapping slot indices). Without COMMIT the pool is
untouched (deferred commit).

Imports triton at module import: load it only through ``speckernels.ops``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from speckernels._reduce import fsum


@triton.jit
def _gdn_verify_kernel(
    q, k, v, g, beta, o, state, inter, slots, dst_slots,
    sq_b, sq_t, sq_h, sk_b, sk_t, sk_h, sv_b, sv_t, sv_h,
    sg_b, sg_t, sbt_b, sbt_t, so_b, so_t, so_h,
    ss_n, ss_h, si_b, si_t, si_h,
    T, scale, eps,
    HV: tl.constexpr, GROUP: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BK: tl.constexpr, BV: tl.constexpr,
    L2NORM: tl.constexpr, SAVE: tl.constexpr, COMMIT: tl.constexpr,
):  # fmt: skip
    i_v = tl.program_id(0)
    i_bh = tl.program_id(1)
    b = (i_bh // HV).to(tl.int64)
    hv = (i_bh % HV).to(tl.int64)
    h = hv // GROUP
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    m_kv = m_k[:, None] & m_v[None, :]
    tile = o_k[:, None] * V + o_v[None, :]  # (BK, BV) offsets inside one (K, V) state

    slot = tl.load(slots + b).to(tl.int64)
    p_state = state + slot * ss_n + hv * ss_h + tile
    s = tl.load(p_state, mask=m_kv, other=0.0).to(tl.float32)

    # Per-position pointers advance by the T stride: fewer integer ops per step.
    p_q = q + b * sq_b + h * sq_h + o_k
    p_k = k + b * sk_b + h * sk_h + o_k
    p_v = v + b * sv_b + hv * sv_h + o_v
    p_g = g + b * sg_b + hv
    p_beta = beta + b * sbt_b + hv
    p_o = o + b * so_b + hv * so_h + o_v
    p_i = inter + b * si_b + hv * si_h + tile
    for _ in range(T):
        b_k = tl.load(p_k, mask=m_k, other=0.0).to(tl.float32)
        b_q = tl.load(p_q, mask=m_k, other=0.0).to(tl.float32)
        b_v = tl.load(p_v, mask=m_v, other=0.0).to(tl.float32)
        b_g = tl.load(p_g).to(tl.float32)
        b_beta = tl.load(p_beta).to(tl.float32)
        if L2NORM:
            b_k = b_k * (1.0 / tl.sqrt(fsum(b_k * b_k) + eps))
            b_q = b_q * (1.0 / tl.sqrt(fsum(b_q * b_q) + eps))
        b_q = b_q * scale
        s = s * tl.exp(b_g)
        kv_mem = fsum(s * b_k[:, None], 0)  # (BV,)
        delta = (b_v - kv_mem) * b_beta
        s = s + b_k[:, None] * delta[None, :]
        b_o = fsum(s * b_q[:, None], 0)  # (BV,)
        tl.store(p_o, b_o.to(p_o.dtype.element_ty), mask=m_v)
        if SAVE:
            tl.store(p_i, s.to(p_i.dtype.element_ty), mask=m_kv)
        p_q += sq_t
        p_k += sk_t
        p_v += sv_t
        p_g += sg_t
        p_beta += sbt_t
        p_o += so_t
        p_i += si_t

    if COMMIT:
        # Same tile, same layout as the load above: each element is read and written by
        # the same thread, so committing in place needs no barrier.
        dst = tl.load(dst_slots + b).to(tl.int64)
        p_dst = state + dst * ss_n + hv * ss_h + tile
        tl.store(p_dst, s.to(p_dst.dtype.element_ty), mask=m_kv)


def default_block_v(v: torch.Tensor) -> int:
    """Value columns per program: fla's 8 on GPU (many small programs keep every SM busy);
    the whole row under the CPU interpreter, where each program costs Python overhead."""
    return 8 if v.is_cuda else triton.next_power_of_2(v.shape[-1])


def gdn_verify_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    state_indices: torch.Tensor,
    out: torch.Tensor,
    intermediate: torch.Tensor | None,
    *,
    commit: bool,
    dst_indices: torch.Tensor | None = None,
    scale: float,
    use_qk_l2norm: bool,
    eps: float,
    block_v: int | None = None,
    num_warps: int = 1,
) -> None:
    """Launch the verify kernel; arguments already validated by ``speckernels.ops.gdn_verify``.

    q, k (B, T, H, K) and v, out (B, T, HV, V) need a unit stride on the last dim, g and beta
    (B, T, HV) a unit stride on the head dim; state (N, HV, K, V) and intermediate
    (B, T, HV, K, V) need contiguous (K, V) blocks. Tiling: ``default_block_v``, 1 warp.
    """
    bsz, seq, heads, kdim = k.shape
    hv, vdim = v.shape[2], v.shape[3]
    save = intermediate is not None
    inter = intermediate if save else state  # placeholder pointer, never written
    si = intermediate.stride()[:3] if save else (0, 0, 0)
    bk = triton.next_power_of_2(kdim)
    bv = min(block_v or default_block_v(v), triton.next_power_of_2(vdim))
    grid = (triton.cdiv(vdim, bv), bsz * hv)
    _gdn_verify_kernel[grid](
        q, k, v, g, beta, out, state, inter, state_indices,
        state_indices if dst_indices is None else dst_indices,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        g.stride(0), g.stride(1), beta.stride(0), beta.stride(1),
        out.stride(0), out.stride(1), out.stride(2),
        state.stride(0), state.stride(1), si[0], si[1], si[2],
        seq, scale, eps,
        HV=hv, GROUP=hv // heads, K=kdim, V=vdim, BK=bk, BV=bv,
        L2NORM=use_qk_l2norm, SAVE=save, COMMIT=commit,
        num_warps=num_warps,
    )  # fmt: skip
