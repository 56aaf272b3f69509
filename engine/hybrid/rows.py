"""`Rows`: the layout of one packed forward. Every sequence's tokens lie end to end in one
row of N tokens (`ids` (1, N)), so projections, MLPs and the LM head run over the real
tokens only, whatever the rows' lengths; the layers that need a token's sequence (the
conv, the recurrence, attention) find it through `offsets`, `token_row` and `positions`,
and its state through its row of the model's `StatePool`. A sequential round is one row;
a scheduler step's slots, or a batch-size-B state's entries, are several."""

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from engine.backend import Keep
from engine.hybrid.config import HybridConfig
from engine.hybrid.errors import HybridError, StateError
from engine.hybrid.gdn import LayerInputs, LayerStates
from engine.hybrid.pool import StatePool
from engine.hybrid.state import HybridState, RecordedInputs, TokenStates

Trace = LayerStates | LayerInputs | None
Kept = TokenStates | RecordedInputs | None


@dataclass(frozen=True)
class Rows:
    """The rows of one packed forward: per row its pool row, start position, length and
    keep; per token its row, offset and position; and the states that advance."""

    pool: StatePool
    pool_rows: tuple[int, ...]
    starts: tuple[int, ...]
    lengths: tuple[int, ...]
    keeps: tuple[Keep, ...]
    offsets: tuple[int, ...]  # (B + 1,) row b's tokens are offsets[b]:offsets[b + 1]
    advances: tuple[tuple[HybridState, int], ...]  # each state once, with its length
    ids: Tensor        # (1, N)
    positions: Tensor  # (N,) each token's position in its sequence
    token_row: Tensor  # (N,)
    token_offset: Tensor  # (N,) index within its row
    # (N, K) for each token, the columns of [every row's conv window | the N conv inputs]
    # its K conv taps read (the window's columns where the row is shorter than K - 1).
    taps: Tensor
    index: Tensor      # (B,) pool_rows on the device
    run: slice | None  # pool_rows as a slice when they are consecutive
    written: Tensor | None  # (W,) the rows whose keep writes their state; None: every row
    # Indices of the P rows keeping PER_TOKEN (P,), and for each row its index among them (-1
    # elsewhere): only they step the recurrence per position.
    stepped_rows: Tensor
    stepped_index: tuple[int, ...]

    @property
    def width(self) -> int:
        """The longest row's length."""
        return max(self.lengths)

    @property
    def uniform(self) -> bool:
        """Whether every row has the same length (then the packed tokens are a (B, T)
        grid already)."""
        return min(self.lengths) == self.width

    @property
    def last_tokens(self) -> list[int]:
        """Each row's last token's index among the N."""
        return [end - 1 for end in self.offsets[1:]]

    def grid(self, x: Tensor) -> Tensor:
        """Packed x (1, N, ...) as (B, T, ...), zero past each row's end (a view when
        the rows are uniform)."""
        rest = x.shape[2:]
        if self.uniform:
            return x.view(len(self.lengths), self.width, *rest)
        out = x.new_zeros(len(self.lengths), self.width, *rest)
        out[self.token_row, self.token_offset] = x[0]
        return out

    def packed(self, x: Tensor) -> Tensor:
        """Grid x (B, T, ...) back to packed (1, N, ...)."""
        if self.uniform:
            return x.reshape(1, -1, *x.shape[2:])
        return x[self.token_row, self.token_offset][None]

    def read(self, pool: Tensor) -> Tensor:
        """The rows' entries (B, ...) of one layer's pool tensor: a view when they are
        consecutive, a copy otherwise."""
        return pool[self.run] if self.run is not None else pool[self.index]

    def write(self, pool: Tensor, value: Tensor) -> None:
        """Write value (B, ...) into the pool rows of the rows whose keep writes."""
        if self.written is not None:
            if self.written.numel():
                pool.index_copy_(0, self.index[self.written], value[self.written])
        elif self.run is not None:
            pool[self.run].copy_(value)
        else:
            pool.index_copy_(0, self.index, value)

    def advance(self) -> None:
        """Mark each state's claimed positions consumed, except where keeping INPUTS leaves
        the state where it was (its commit advances it)."""
        for state, length in self.advances:
            state.advance(length)

    def kept(self, traces: Sequence[Sequence[Trace]]) -> list[Kept]:
        """Per row, what it keeps, from each GDN layer's per-row traces."""
        return [_KEPT[keep](start=start, length=length, layers=tuple(t[b] for t in traces))
                if keep in _KEPT else None
                for b, (start, length, keep) in enumerate(zip(self.starts, self.lengths,
                                                              self.keeps, strict=True))]


_KEPT: dict[Keep, type[TokenStates] | type[RecordedInputs]] = {
    Keep.PER_TOKEN: TokenStates, Keep.INPUTS: RecordedInputs}


def claim_rows(config: HybridConfig, states: Sequence[HybridState],
               batches: Sequence[Sequence[int]], keeps: Sequence[Keep],
               device: torch.device) -> Rows:
    """Check the verify rows (batch-size-1 states, one batch and keep each), then claim
    each row's KV positions in its own state."""
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
    starts = [s.claim(len(b)) for s, b in zip(states, batches, strict=True)]
    advances = [(s, len(b)) for s, b, k in zip(states, batches, keeps, strict=True)
                if k is not Keep.INPUTS]
    ids = torch.tensor([[t for b in batches for t in b]], dtype=torch.long, device=device)
    return _rows(config, states[0].pool, [s.index for s in states], starts,
                 [len(b) for b in batches], ids, keeps, advances)


def state_rows(config: HybridConfig, state: HybridState, input_ids: Tensor) -> Rows:
    """The rows of a forward of input_ids (B, T) from `state` (batch size B): entry b is
    row b, all at the state's position, keeping nothing."""
    batch, length = input_ids.shape
    if state.config != config or state.batch_size != batch:
        raise StateError(f"state was built for another model or batch size "
                         f"({state.batch_size}); input batch is {batch}")
    start = state.claim(length)
    return _rows(config, state.pool, [state.index + b for b in range(batch)], [start] * batch,
                 [length] * batch, input_ids.reshape(1, -1), [Keep.NOTHING] * batch,
                 [(state, length)])


def _rows(config: HybridConfig, pool: StatePool, pool_rows: Sequence[int],
          starts: Sequence[int], lengths: Sequence[int], ids: Tensor, keeps: Sequence[Keep],
          advances: Sequence[tuple[HybridState, int]]) -> Rows:
    device = ids.device
    offsets, token_row, token_offset, taps = _layout(tuple(lengths),
                                                     config.linear_conv_kernel_dim, device)
    if len(lengths) == 1:
        positions = torch.arange(starts[0], starts[0] + lengths[0], device=device)
    else:
        positions = torch.tensor(starts, device=device)[token_row] + token_offset
    index, run, written, stepped_rows, stepped_index = _selection(
        tuple(pool_rows), tuple(keeps), device)
    return Rows(
        pool=pool, pool_rows=tuple(pool_rows), starts=tuple(starts), lengths=tuple(lengths),
        keeps=tuple(keeps), offsets=offsets, advances=tuple(advances), ids=ids,
        positions=positions, token_row=token_row, token_offset=token_offset, taps=taps,
        index=index, run=run, written=written, stepped_rows=stepped_rows,
        stepped_index=stepped_index)


@functools.lru_cache(maxsize=1024)
def _selection(pool_rows: tuple[int, ...], keeps: tuple[Keep, ...], device: torch.device
               ) -> tuple[Tensor, slice | None, Tensor | None, Tensor, tuple[int, ...]]:
    """What depends only on the rows' pool rows and keeps (a slot's decode steps repeat
    them): `index`, `run`, `written`, `stepped_rows` and `stepped_index` of `Rows`."""
    written = [b for b, k in enumerate(keeps) if k is not Keep.INPUTS]
    stepped = [b for b, k in enumerate(keeps) if k is Keep.PER_TOKEN]
    index = tuple(stepped.index(b) if b in stepped else -1 for b in range(len(keeps)))
    consecutive = all(r == pool_rows[0] + b for b, r in enumerate(pool_rows))
    return (torch.tensor(pool_rows, dtype=torch.long, device=device),
            slice(pool_rows[0], pool_rows[0] + len(pool_rows)) if consecutive else None,
            (None if len(written) == len(keeps)
             else torch.tensor(written, dtype=torch.long, device=device)),
            torch.tensor(stepped, dtype=torch.long, device=device), index)


@functools.lru_cache(maxsize=256)
def _layout(lengths: tuple[int, ...], kernel: int, device: torch.device
            ) -> tuple[tuple[int, ...], Tensor, Tensor, Tensor]:
    """What depends only on the rows' lengths (decode steps repeat a few layouts): the
    offsets, each token's row and offset in it, and the conv taps (N, K). Tap j of a
    token at offset o reads its row's input o - (K - 1) + j or, before the row's first
    token, that many columns back into the row's window; columns 0..B(K-1)-1 are the
    windows (row b's at b(K-1)..), then the N inputs."""
    offsets = [0, *itertools.accumulate(lengths)]
    rows = len(lengths)
    token_row = torch.repeat_interleave(torch.arange(rows), torch.tensor(lengths))
    first = torch.tensor(offsets[:-1])
    token_offset = torch.arange(offsets[-1]) - first[token_row]
    back = kernel - 1
    source = token_offset[:, None] - back + torch.arange(kernel)  # (N, K) offset in the row
    taps = torch.where(source >= 0, rows * back + first[token_row][:, None] + source,
                       token_row[:, None] * back + back + source)
    return (tuple(offsets), token_row.to(device), token_offset.to(device), taps.to(device))
