"""The verify forward, one row per sequence: a sequential round's batch is one row, a
scheduler step's slots are several, of different lengths from states at different
positions, right-padded to the longest. Projections, MLPs, the conv and the GDN
recurrence run once over the batch, reading and writing each row's GDN state in the
model's `StatePool` by its pool row (a view when the rows are consecutive); each row's
attention runs over its own KV cache, which is a separate tensor of its own length
(gathering them into one padded tensor copies every row's whole context per layer and
step: on the shipped model's shapes, 8 rows of 5 tokens on CPU, 2.2 ms against 1.3 ms for
the per-row calls at ~400 tokens of context, 11 against 3.8 ms at ~2,100). What each row
keeps and leaves in its state is what a verify of that row alone gives, up to the
rounding of the batch shape: right padding never reaches a real position (everything is
causal), and the recurrence steps over padding without writing or decaying."""

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from engine.backend import Keep
from engine.hybrid.attention import GatedAttention
from engine.hybrid.config import HybridConfig
from engine.hybrid.errors import HybridError, StateError
from engine.hybrid.gdn import GatedDeltaNet, LayerInputs, LayerStates
from engine.hybrid.pool import StatePool
from engine.hybrid.state import HybridState, RecordedInputs, TokenStates
from speckernels import ops
from speckernels.backend import KernelBackend
from speckernels.reference import chunk_gated_delta, delta_step_, readout

Trace = LayerStates | LayerInputs | None
Kept = TokenStates | RecordedInputs | None
_PAD = 0  # any valid id: padded positions' outputs are never read


@dataclass(frozen=True)
class Rows:
    """The rows of one batched verify: each row's state (batch size 1), the position its
    batch starts at, its real length and what its verify keeps."""

    states: tuple[HybridState, ...]
    starts: tuple[int, ...]
    lengths: tuple[int, ...]
    keeps: tuple[Keep, ...]
    ids: Tensor   # (B, T) the batches, right-padded
    live: Tensor | None  # (B, T) bool, True at each row's real positions; None: no padding
    # Indices of the P rows keeping PER_TOKEN (P,), and for each row its index among them (-1
    # elsewhere): only they step the recurrence per position.
    stepped_rows: Tensor
    stepped_index: tuple[int, ...]
    pool: StatePool  # the rows' shared pool, where row b's GDN state is row pool_rows[b]
    pool_rows: Tensor  # (B,)
    run: slice | None  # pool_rows as a slice when they are consecutive rows
    written: Tensor | None  # (W,) the rows whose keep writes their state; None: every row

    @property
    def width(self) -> int:
        """The padded length T (the longest row)."""
        return max(self.lengths)

    def read(self, pool: Tensor) -> Tensor:
        """The rows' entries (B, ...) of one layer's pool tensor: a view when they are
        consecutive, a copy otherwise."""
        return pool[self.run] if self.run is not None else pool[self.pool_rows]

    def write(self, pool: Tensor, value: Tensor) -> None:
        """Write value (B, ...) into the pool rows of the rows whose keep writes."""
        if self.written is not None and not self.written.numel():
            return
        if self.written is not None:
            pool.index_copy_(0, self.pool_rows[self.written], value[self.written])
        elif self.run is not None:
            pool[self.run].copy_(value)
        else:
            pool.index_copy_(0, self.pool_rows, value)

    def advance(self) -> None:
        """Mark each row's claimed positions consumed, except where keeping INPUTS leaves
        the state where it was (its commit advances it)."""
        for state, length, keep in zip(self.states, self.lengths, self.keeps, strict=True):
            if keep is not Keep.INPUTS:
                state.advance(length)

    def kept(self, traces: Sequence[Sequence[Trace]]) -> list[Kept]:
        """Per row, what it keeps, from each GDN layer's per-row traces."""
        out: list[Kept] = []
        for b, (start, length, keep) in enumerate(zip(self.starts, self.lengths, self.keeps,
                                                      strict=True)):
            layers = tuple(layer[b] for layer in traces)
            if keep is Keep.PER_TOKEN:
                out.append(TokenStates(start=start, length=length, layers=layers))
            elif keep is Keep.INPUTS:
                out.append(RecordedInputs(start=start, length=length, layers=layers))
            else:
                out.append(None)
        return out


def claim_rows(config: HybridConfig, states: Sequence[HybridState],
               batches: Sequence[Sequence[int]], keeps: Sequence[Keep],
               device: torch.device) -> Rows:
    """Check the rows, then claim each row's KV positions in its own state. The row
    tensors go to `device` once here, not once a layer."""
    if not len(states) == len(batches) == len(keeps):
        raise HybridError(f"a batched verify needs one batch and one keep per state; got "
                          f"{len(states)} states, {len(batches)} batches, {len(keeps)} keeps")
    if not states:
        raise HybridError("a batched verify needs at least one row")
    if len({id(s) for s in states}) != len(states):
        raise StateError("a state appears in two rows of one batched verify; each slot's "
                         "state can take one batch per forward")
    for i, (state, batch) in enumerate(zip(states, batches, strict=True)):
        if state.config != config or state.batch_size != 1 or state.pool is not states[0].pool:
            raise StateError(f"row {i}: the state was built for another model, for batch "
                             f"size {state.batch_size} or outside the model's pool; rows need "
                             f"batch-size-1 states from the model's new_state()")
        if not batch:
            raise HybridError(f"row {i}: an empty batch (a verify batch starts with the last "
                              f"committed token)")
    lengths = [len(b) for b in batches]
    width = max(lengths)
    ids = torch.tensor([[*b, *[_PAD] * (width - len(b))] for b in batches], dtype=torch.long,
                       device=device)
    live = None
    if min(lengths) < width:
        live = torch.arange(width, device=device) < torch.tensor(lengths, device=device)[:, None]
    first = states[0].index
    consecutive = all(s.index == first + b for b, s in enumerate(states))
    written = [b for b, k in enumerate(keeps) if k is not Keep.INPUTS]
    stepped = [b for b, k in enumerate(keeps) if k is Keep.PER_TOKEN]
    index = [-1] * len(states)
    for i, b in enumerate(stepped):
        index[b] = i
    return Rows(states=tuple(states), starts=tuple(s.claim(n) for s, n in
                                                  zip(states, lengths, strict=True)),
                lengths=tuple(lengths), keeps=tuple(keeps), ids=ids, live=live,
                stepped_rows=torch.tensor(stepped, dtype=torch.long, device=device),
                stepped_index=tuple(index), pool=states[0].pool,
                pool_rows=torch.tensor([s.index for s in states], device=device),
                run=slice(first, first + len(states)) if consecutive else None,
                written=(None if len(written) == len(states)
                         else torch.tensor(written, dtype=torch.long, device=device)))


def attention_rows(attn: GatedAttention, x: Tensor, rows: Rows, slot: int,
                   rope: tuple[Tensor, Tensor]) -> Tensor:
    """Attention layer `slot` over x (B, T, hidden): projections batched, each row's
    real positions attending over its own cache, where their keys and values go."""
    query, gate, key, value = attn.project(x, rope)  # (B,H,T,D), (B,T,H*D), (B,Hkv,T,D) x2
    if rows.live is None:  # no padding: each row's output is whole
        parts = [attn.attend(query[b:b + 1], key[b:b + 1], value[b:b + 1], state.keys[slot],
                             state.values[slot], start)
                 for b, (state, start) in enumerate(zip(rows.states, rows.starts, strict=True))]
        return attn.output(parts[0] if len(parts) == 1 else torch.cat(parts), gate)
    attended = x.new_zeros(gate.shape)  # (B, T, H * D); padding stays 0
    for b, (state, start, n) in enumerate(zip(rows.states, rows.starts, rows.lengths,
                                              strict=True)):
        attended[b:b + 1, :n] = attn.attend(
            query[b:b + 1, :, :n], key[b:b + 1, :, :n], value[b:b + 1, :, :n],
            state.keys[slot], state.values[slot], start)
    return attn.output(attended, gate)


def gdn_rows(gdn: GatedDeltaNet, x: Tensor, rows: Rows, slot: int, kernels: KernelBackend
             ) -> tuple[Tensor, list[Trace]]:
    """GDN layer `slot` over x (B, T, hidden) from each row's own conv window and
    recurrent state; returns the output (B, T, hidden) and each row's trace, its state
    written as its keep says (`GatedDeltaNet.forward`)."""
    conv_pool, recurrent_pool = rows.pool.conv[slot], rows.pool.recurrent[slot]
    width = conv_pool.shape[-1]
    mixed, full, (q, k, v, g, beta) = gdn.inputs(x, rows.read(conv_pool))
    initial = rows.read(recurrent_pool)  # (B, Hv, Dk, Dv) fp32
    in_place = False
    if rows.width == 1:  # every row decodes one token: the recurrent form
        # Stepped in the pool itself only when every row advances its own live state.
        in_place = rows.run is not None and all(k is Keep.NOTHING for k in rows.keeps)
        final = initial if in_place or rows.run is None else initial.clone()
        delta_step_(final, k[:, 0], v[:, 0], g[:, 0], beta[:, 0])
        core = readout(q[:, 0], final).unsqueeze(1)  # (B, 1, Hv, Dv)
        stepped = final.unsqueeze(1)  # (B, 1, Hv, Dk, Dv)
        copy_stepped = False
        picks: Sequence[int] = range(len(rows.states))
    else:
        if rows.live is not None:
            # k = g = beta = 0 at padding: it neither writes nor decays, so `final` is each
            # row's state after its own last token (the chunked form pads chunks this way).
            live = rows.live
            k, g, beta = (torch.where(live[..., None, None], k, 0.0),
                          torch.where(live[..., None], g, 0.0),
                          torch.where(live[..., None], beta, 0.0))
        core, final = chunk_gated_delta(q, k, v, g, beta, initial)
        stepped = _stepped(rows, q, k, v, g, beta, recurrent_pool, kernels)
        picks = rows.stepped_index
        # Each PER_TOKEN row commits its stepped last state: all of final when every row
        # keeps PER_TOKEN unpadded, or row by row.
        copy_stepped = rows.live is not None or len(rows.stepped_rows) < len(rows.lengths)
        if not copy_stepped:
            final = stepped[:, -1]
    traces: list[Trace] = []
    whole = rows.live is None and len(rows.lengths) == 1  # the row is the whole batch
    for b, (n, keep) in enumerate(zip(rows.lengths, rows.keeps, strict=True)):
        if keep is Keep.INPUTS and whole:  # the state stays; the record is the row's
            traces.append(LayerInputs(q=q, k=k, v=v, g=g, beta=beta, conv_in=mixed))
        elif keep is Keep.INPUTS:
            traces.append(LayerInputs(q=q[b:b + 1, :n], k=k[b:b + 1, :n], v=v[b:b + 1, :n],
                                      g=g[b:b + 1, :n], beta=beta[b:b + 1, :n],
                                      conv_in=mixed[b:b + 1, :, :n]))
        elif keep is Keep.PER_TOKEN:
            states = stepped if whole else stepped[picks[b]:picks[b] + 1, :n]  # (1,n,Hv,Dk,Dv)
            windows = _windows(full, width)
            traces.append(LayerStates(conv=windows if whole else windows[b:b + 1, :n],
                                      recurrent=states))
            if copy_stepped:
                final[b] = states[0, -1]
        else:
            traces.append(None)
    if not in_place:
        rows.write(recurrent_pool, final)
    ends = (full[..., -width:] if rows.live is None  # (B, C, K-1): each row's last window
            else _windows(full, width)[torch.arange(len(rows.lengths), device=x.device),
                                       torch.tensor(rows.lengths, device=x.device) - 1])
    rows.write(conv_pool, ends)
    return gdn.output(x, core), traces


def _windows(full: Tensor, width: int) -> Tensor:
    """The conv window (B, T, C, K-1) after each position, of the padded input full
    (B, C, K-1+T)."""
    return full.unfold(-1, width, 1)[:, :, 1:].transpose(1, 2)


def _stepped(rows: Rows, q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor,
             pool: Tensor, kernels: KernelBackend) -> Tensor:
    """The stepped per-position states (P, T', Hv, Dk, Dv) of the P rows keeping PER_TOKEN,
    T' their longest length (stepped like replay, so that select(j) and replay(j + 1)
    agree bit for bit)."""
    if not rows.stepped_rows.numel():
        return pool.new_empty(0)
    sub = rows.stepped_rows
    span = max(n for n, i in zip(rows.lengths, rows.stepped_index, strict=True) if i >= 0)
    if len(sub) == len(rows.lengths) and rows.run is not None:  # every row, a run of the pool
        inputs = (q, k, v, g, beta) if span == rows.width else (
            t[:, :span] for t in (q, k, v, g, beta))
        state, slots = pool[rows.run], None
    else:
        inputs = (t[sub, :span] for t in (q, k, v, g, beta))
        state, slots = pool, rows.pool_rows[sub]
    _, states = ops.gdn_verify(*inputs, state, state_indices=slots, scale=1.0,
                               backend=kernels)
    return states
