"""Triton kernel: commit the accepted position's state (recurrent and conv) for a whole batch.

The ``per_token`` strategy's commit is a gather: for each row b with accept_idx[b] >= 0,
copy the recurrent state and the conv window saved after position accept_idx[b] into the
row's live slot. Both tensors, every row and every layer move in one launch: the grid's
first axis enumerates blocks of the recurrent row followed by blocks of the conv row, so
a commit costs one launch whatever the batch or layer count. Rows holding -1 are skipped
before any load.

Imports triton at module import: load it only through ``speckernels.ops``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _gdn_commit_kernel(
    dst_s, src_s, dst_c, src_c, accept, slots,
    sd_l, sd_n, ss_l, ss_b, ss_t,
    cd_l, cd_n, cs_l, cs_b, cs_t,
    ROW_S, ROW_C, NBLK_S,
    BLOCK: tl.constexpr, HAS_CONV: tl.constexpr,
):  # fmt: skip
    blk = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    layer = tl.program_id(2).to(tl.int64)
    idx = tl.load(accept + b).to(tl.int64)
    if idx >= 0:
        slot = tl.load(slots + b).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        if blk < NBLK_S:
            o = blk.to(tl.int64) * BLOCK + offs
            m = o < ROW_S
            x = tl.load(src_s + layer * ss_l + b * ss_b + idx * ss_t + o, mask=m)
            p = dst_s + layer * sd_l + slot * sd_n + o
            tl.store(p, x.to(p.dtype.element_ty), mask=m)
        elif HAS_CONV:
            o = (blk - NBLK_S).to(tl.int64) * BLOCK + offs
            m = o < ROW_C
            x = tl.load(src_c + layer * cs_l + b * cs_b + idx * cs_t + o, mask=m)
            p = dst_c + layer * cd_l + slot * cd_n + o
            tl.store(p, x.to(p.dtype.element_ty), mask=m)


def gdn_commit_triton(
    state: torch.Tensor,
    intermediate: torch.Tensor,
    accept_idx: torch.Tensor,
    state_indices: torch.Tensor,
    conv_state: torch.Tensor | None = None,
    conv_intermediate: torch.Tensor | None = None,
    *,
    block: int = 2048,
    num_warps: int = 4,
) -> None:
    """Launch the commit gather on layer-stacked tensors (``speckernels.ops`` adds the L dim).

    state (L, N, *R) and intermediate (L, B, T, *R) with each *R block contiguous; the
    optional conv pair (L, N, C, W) and (L, B, T, C, W) likewise. The T stride may be 0 (an
    expanded buffer), which the benchmark uses to avoid allocating T copies.
    """
    layers, bsz = intermediate.shape[0], intermediate.shape[1]
    row_s = state[0, 0].numel()
    nblk_s = triton.cdiv(row_s, block)
    has_conv = conv_state is not None
    if has_conv:
        row_c = conv_state[0, 0].numel()
        nblk_c = triton.cdiv(row_c, block)
        cd, cs = conv_state.stride(), conv_intermediate.stride()
        c_args = (conv_state, conv_intermediate)
    else:
        row_c, nblk_c, cd, cs = 0, 0, (0, 0), (0, 0, 0)
        c_args = (state, intermediate)  # placeholder pointers, never dereferenced
    sd, ss = state.stride(), intermediate.stride()
    grid = (nblk_s + nblk_c, bsz, layers)
    _gdn_commit_kernel[grid](
        state, intermediate, *c_args, accept_idx, state_indices,
        sd[0], sd[1], ss[0], ss[1], ss[2],
        cd[0], cd[1], cs[0], cs[1], cs[2],
        row_s, row_c, nblk_s,
        BLOCK=block, HAS_CONV=has_conv, num_warps=num_warps,
    )  # fmt: skip
