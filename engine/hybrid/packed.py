"""The sequence-aware layers of the packed forward (`engine.hybrid.rows`): tokens of all
rows arrive end to end (1, N, hidden); each GDN layer runs its conv through each token's
own taps and its recurrence from each row's state in the model's `StatePool`, and each
attention layer attends each row's tokens over that row's KV in the pool. What a row keeps
and leaves in its state is what a forward of that row alone gives, up to the rounding of
the batch shape.

The recurrence's chunked form works on whole chunks, so rows of different lengths go
through it as a (B, T) grid, zero past each row's end: k = g = beta = 0 there, which
neither writes nor decays the state, as the chunked form pads its own last chunk."""

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from engine.backend import Keep
from engine.hybrid.attention import GatedAttention
from engine.hybrid.gdn import GatedDeltaNet, LayerInputs, LayerStates
from engine.hybrid.rows import Rows, Trace
from speckernels import ops
from speckernels.backend import KernelBackend
from speckernels.reference import chunk_gated_delta, delta_step_, readout


def attention_rows(attn: GatedAttention, x: Tensor, rows: Rows, slot: int,
                   rope: tuple[Tensor, Tensor]) -> Tensor:
    """Attention layer `slot` over x (1, N, hidden): projections over all tokens, each
    row's tokens attending over its own KV rows, where their keys and values go."""
    query, gate, key, value = attn.project(x, rope)  # (1,H,N,D), (1,N,H*D), (1,Hkv,N,D) x2
    keys, values = rows.pool.keys[slot], rows.pool.values[slot]  # (R, Hkv, capacity, D)
    parts = [attn.attend(query[:, :, s:e], key[:, :, s:e], value[:, :, s:e],
                         keys[r:r + 1], values[r:r + 1], start)
             for r, start, s, e in zip(rows.pool_rows, rows.starts, rows.offsets[:-1],
                                       rows.offsets[1:], strict=True)]
    return attn.output(parts[0] if len(parts) == 1 else torch.cat(parts, dim=1), gate)


def conv_rows(window: Tensor, mixed: Tensor, weight: Tensor, taps: Tensor
              ) -> tuple[Tensor, Tensor]:
    """Depthwise causal conv + SiLU of the packed inputs mixed (C, N), each token reading
    its taps (N, K) of [the rows' windows (B, C, K-1) | mixed]; weight (C, 1, K). Returns
    the output (C, N) and the taps' values (C, N, K), whose last K-1 are the window after
    each token. Summed tap by tap in `causal_conv`'s order, so the bits are its bits."""
    if window.shape[0] == 1:  # one row: its taps are windows of [window | mixed], a view
        values = torch.cat((window[0], mixed), dim=1).unfold(1, taps.shape[1], 1)
    else:
        source = torch.cat((window.transpose(0, 1).reshape(window.shape[1], -1), mixed), 1)
        values = source[:, taps]  # (C, N, K)
    out = values[..., 0] * weight[:, :, 0]
    for i in range(1, taps.shape[1]):
        out = out + values[..., i] * weight[:, :, i]
    return F.silu(out), values


def gdn_rows(gdn: GatedDeltaNet, x: Tensor, rows: Rows, slot: int, kernels: KernelBackend
             ) -> tuple[Tensor, list[Trace]]:
    """GDN layer `slot` over x (1, N, hidden) from each row's conv window and recurrent
    state; returns the output (1, N, hidden) and each row's trace, its state written as
    its keep says."""
    conv_pool, recurrent_pool = rows.pool.conv[slot], rows.pool.recurrent[slot]
    mixed = gdn.in_proj_qkv(x)[0].T  # (C, N)
    conv_out, taps = conv_rows(rows.read(conv_pool), mixed, gdn.conv1d.weight, rows.taps)
    q, k, v, g, beta = gdn.recurrence_inputs(x, conv_out[None])  # (1, N, H, D), (1, N, H)
    initial = rows.read(recurrent_pool)  # (B, Hv, Dk, Dv) fp32
    in_place = False
    if rows.width == 1:  # every row decodes one token: the recurrent form
        # Stepped in the pool itself only when every row advances its own live state.
        in_place = rows.run is not None and all(k is Keep.NOTHING for k in rows.keeps)
        final = initial if in_place or rows.run is None else initial.clone()
        delta_step_(final, k[0], v[0], g[0], beta[0])
        core = readout(q[0], final)[None]  # (1, B, Hv, Dv)
        stepped = final.unsqueeze(1)  # (B, 1, Hv, Dk, Dv)
        copy_stepped = False
        picks: Sequence[int] = range(len(rows.lengths))
    else:
        grid = [rows.grid(t) for t in (q, k, v, g, beta)]  # (B, T, ...)
        core_grid, final = chunk_gated_delta(*grid, initial)
        core = rows.packed(core_grid)
        stepped = _stepped(rows, grid, recurrent_pool, kernels)
        picks = rows.stepped_index
        # Each PER_TOKEN row commits its stepped last state: all of final when every row
        # keeps PER_TOKEN and is as long as the longest, or row by row.
        copy_stepped = not rows.uniform or len(rows.stepped_rows) < len(rows.lengths)
        if not copy_stepped:
            final = stepped[:, -1]
    traces: list[Trace] = []
    for b, (n, keep) in enumerate(zip(rows.lengths, rows.keeps, strict=True)):
        s, e = rows.offsets[b], rows.offsets[b + 1]
        if keep is Keep.INPUTS:  # the state stays; the record is the row's
            traces.append(LayerInputs(q=q[:, s:e], k=k[:, s:e], v=v[:, s:e], g=g[:, s:e],
                                      beta=beta[:, s:e], conv_in=mixed[None, :, s:e]))
        elif keep is Keep.PER_TOKEN:
            states = stepped[picks[b]:picks[b] + 1, :n]  # (1, n, Hv, Dk, Dv)
            windows = taps[:, s:e, 1:].transpose(0, 1)[None]  # (1, n, C, K-1)
            traces.append(LayerStates(conv=windows, recurrent=states))
            if copy_stepped:
                final[b] = states[0, -1]
        else:
            traces.append(None)
    if not in_place:
        rows.write(recurrent_pool, final)
    ends = taps[:, -1:] if len(rows.lengths) == 1 else taps[:, rows.last_tokens]
    rows.write(conv_pool, ends[..., 1:].transpose(0, 1))  # (B, C, K-1)
    return gdn.output(x, core), traces


def _stepped(rows: Rows, grid: Sequence[Tensor], pool: Tensor, kernels: KernelBackend
             ) -> Tensor:
    """The stepped per-position states (P, T', Hv, Dk, Dv) of the P rows keeping PER_TOKEN,
    T' their longest length (stepped like replay, so that select(j) and replay(j + 1)
    agree bit for bit), from the grid's q, k, v, g, beta (B, T, ...)."""
    if not rows.stepped_rows.numel():
        return pool.new_empty(0)
    sub = rows.stepped_rows
    span = max(n for n, i in zip(rows.lengths, rows.stepped_index, strict=True) if i >= 0)
    if len(sub) == len(rows.lengths) and rows.run is not None:  # every row, a run of the pool
        inputs = grid if span == rows.width else [t[:, :span] for t in grid]
        state, slots = pool[rows.run], None
    else:
        inputs = [t[sub, :span] for t in grid]
        state, slots = pool, rows.index[sub]
    _, states = ops.gdn_verify(*inputs, state, state_indices=slots, scale=1.0,
                               backend=kernels)
    return states
