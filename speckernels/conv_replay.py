"""Triton kernel: slide the live conv window over the accepted prefix of recorded inputs.

The conv half of the ``input_replay`` commit. The window after position j is
ext[j+1 : j+1+S] of ext = [old window (S), x]; it is a pure gather, so the result is
bitwise the window ``conv_update`` kept after position j. Rows holding -1 keep their window.

Imports triton at module import: load it only through ``speckernels.ops``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from speckernels.conv_update import _ext_gather


@triton.jit
def _conv_replay_kernel(
    x, conv_state, accept, slots,
    sx_b, sx_c, sx_t, sc_n, sc_c, sc_w,
    C,
    S: tl.constexpr, BS: tl.constexpr, BC: tl.constexpr,
):  # fmt: skip
    i_c = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    last = tl.load(accept + b).to(tl.int64)
    if last >= 0:
        o_c = (i_c * BC + tl.arange(0, BC)).to(tl.int64)
        o_s = tl.arange(0, BS)
        m_c = o_c < C
        slot = tl.load(slots + b).to(tl.int64)
        p_win = conv_state + slot * sc_n + o_c[:, None] * sc_c
        p_x = x + b * sx_b + o_c[:, None] * sx_c
        win = _ext_gather(p_win, p_x, last + 1, o_s, m_c, sc_w, sx_t, S, S)
        # The new window overlaps the old one shifted: finish every read before writing.
        tl.debug_barrier()
        m_cs = m_c[:, None] & (o_s < S)[None, :]
        tl.store(p_win + o_s[None, :] * sc_w, win, mask=m_cs)


def conv_replay_triton(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    accept_idx: torch.Tensor,
    state_indices: torch.Tensor,
    *,
    block_c: int = 256,
    num_warps: int = 4,
) -> None:
    """Launch the conv replay: x (B, C, T), conv_state (N, C, S), accept_idx (B,), any strides."""
    bsz, channels, _ = x.shape
    width = conv_state.shape[2]
    bc = min(block_c, triton.next_power_of_2(channels))
    grid = (triton.cdiv(channels, bc), bsz)
    _conv_replay_kernel[grid](
        x, conv_state, accept_idx, state_indices,
        x.stride(0), x.stride(1), x.stride(2),
        conv_state.stride(0), conv_state.stride(1), conv_state.stride(2),
        channels,
        S=width, BS=triton.next_power_of_2(width), BC=bc, num_warps=num_warps,
    )  # fmt: skip
