"""Triton kernel: depthwise causal conv1d update over several positions, keeping every window.

Think of row b as the sequence ext = [window (S), x (T)]. The conv at position t reads the
KW inputs ext[t+1+S-KW : t+1+S]; the window kept after t is ext[t+1 : t+1+S]. Each program
owns a block of channels and gathers those slices straight from the two sources (old window
or new inputs) instead of shifting registers, so one kernel serves HF's S = KW and
causal-conv1d's S = KW - 1 alike. Windows are stored per position for ``per_token``
commit; the last window is written only on COMMIT, into slot dst_slots[b].

Imports triton at module import: load it only through ``speckernels.ops``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from speckernels._reduce import fsum


@triton.jit
def _ext_gather(p_win, p_x, base, o_p, m_c, sc_w, sx_t, S: tl.constexpr, NPOS: tl.constexpr):
    """ext[base + o_p] for a (BC, len(o_p)) tile, o_p < NPOS, in the window dtype.

    New inputs are rounded to the window dtype, as HF's cat-then-copy does, so a stored
    window and the conv that read it agree bit for bit.
    """
    pos = base + o_p
    m = m_c[:, None] & (o_p < NPOS)[None, :]
    old = pos < S
    w_old = tl.load(p_win + pos[None, :] * sc_w, mask=m & old[None, :], other=0.0)
    w_new = tl.load(p_x + (pos - S)[None, :] * sx_t, mask=m & (pos >= S)[None, :], other=0.0)
    return tl.where(old[None, :], w_old, w_new.to(w_old.dtype))


@triton.jit
def _conv_update_kernel(
    x, conv_state, weight, bias, out, inter, slots, dst_slots,
    sx_b, sx_c, sx_t, sc_n, sc_c, sc_w, sw_c, sw_w, so_b, so_c, so_t,
    si_b, si_t, si_c, si_w,
    C, T,
    S: tl.constexpr, BS: tl.constexpr, KW: tl.constexpr, BKW: tl.constexpr, BC: tl.constexpr,
    HAS_BIAS: tl.constexpr, SILU: tl.constexpr, SAVE: tl.constexpr, COMMIT: tl.constexpr,
):  # fmt: skip
    i_c = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    o_c = (i_c * BC + tl.arange(0, BC)).to(tl.int64)
    m_c = o_c < C
    o_kw = tl.arange(0, BKW)
    o_s = tl.arange(0, BS)
    m_cs = m_c[:, None] & (o_s < S)[None, :]
    slot = tl.load(slots + b).to(tl.int64)
    p_win = conv_state + slot * sc_n + o_c[:, None] * sc_c  # (BC, 1) row starts
    p_x = x + b * sx_b + o_c[:, None] * sx_c
    m_wt = m_c[:, None] & (o_kw < KW)[None, :]
    wt = tl.load(weight + o_c[:, None] * sw_c + o_kw[None, :] * sw_w, mask=m_wt, other=0.0)
    wt = wt.to(tl.float32)  # (BC, BKW)
    if HAS_BIAS:
        bs = tl.load(bias + o_c, mask=m_c, other=0.0).to(tl.float32)
    for t in range(T):
        taps = _ext_gather(p_win, p_x, t + 1 + S - KW, o_kw, m_c, sc_w, sx_t, S, KW)
        acc = fsum(taps.to(tl.float32) * wt, 1)  # (BC,)
        if HAS_BIAS:
            acc = acc + bs
        if SILU:
            acc = acc / (1.0 + tl.exp(-acc))
        p_o = out + b * so_b + o_c * so_c + t * so_t
        tl.store(p_o, acc.to(p_o.dtype.element_ty), mask=m_c)
        if SAVE:
            win = _ext_gather(p_win, p_x, t + 1, o_s, m_c, sc_w, sx_t, S, S)
            p_i = inter + b * si_b + t * si_t + o_c[:, None] * si_c + o_s[None, :] * si_w
            tl.store(p_i, win.to(p_i.dtype.element_ty), mask=m_cs)
    if COMMIT:
        last = _ext_gather(p_win, p_x, T, o_s, m_c, sc_w, sx_t, S, S)  # window after T-1
        # Other threads may still be reading the old window this store overwrites.
        tl.debug_barrier()
        p_dst = conv_state + tl.load(dst_slots + b).to(tl.int64) * sc_n + o_c[:, None] * sc_c
        tl.store(p_dst + o_s[None, :] * sc_w, last, mask=m_cs)


def conv_update_triton(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    state_indices: torch.Tensor,
    out: torch.Tensor,
    intermediate: torch.Tensor | None,
    *,
    silu: bool,
    commit: bool,
    dst_indices: torch.Tensor | None = None,
    block_c: int = 256,
    num_warps: int = 4,
) -> None:
    """Launch the conv update; arguments already validated by ``speckernels.ops.conv_update``.

    x and out (B, C, T), conv_state (N, C, S), weight (C, KW) with S >= KW - 1, bias (C,),
    intermediate (B, T, C, S): any strides.
    """
    bsz, channels, seq = x.shape
    width, taps = conv_state.shape[2], weight.shape[1]
    save = intermediate is not None
    inter = intermediate if save else out  # placeholder pointer, never written
    si = intermediate.stride() if save else (0, 0, 0, 0)
    bc = min(block_c, triton.next_power_of_2(channels))
    grid = (triton.cdiv(channels, bc), bsz)
    _conv_update_kernel[grid](
        x, conv_state, weight, bias if bias is not None else weight, out, inter, state_indices,
        state_indices if dst_indices is None else dst_indices,
        x.stride(0), x.stride(1), x.stride(2),
        conv_state.stride(0), conv_state.stride(1), conv_state.stride(2),
        weight.stride(0), weight.stride(1), out.stride(0), out.stride(1), out.stride(2),
        si[0], si[1], si[2], si[3],
        channels, seq,
        S=width, BS=triton.next_power_of_2(width), KW=taps, BKW=triton.next_power_of_2(taps),
        BC=bc, HAS_BIAS=bias is not None, SILU=silu, SAVE=save, COMMIT=commit,
        num_warps=num_warps,
    )  # fmt: skip
