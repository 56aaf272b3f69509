"""`StatePool`: every layer's state for all of a model's sequences, one tensor per layer
with a row per sequence: GDN conv windows and recurrent states, attention keys and values.
A `HybridState` owns a run of rows (one per batch entry) and sees them as views; a packed
forward reads and writes the rows of all its sequences by index, never concatenating
per-sequence tensors.

KV rows share one capacity (positions), grown by doubling for every row when one row
needs more: a row is a contiguous slice that attention reads as a view, at the price of
the longest sequence's length in every row (a paged pool would need a gather per layer
and step, which on CPU costs more than the attention it feeds)."""

import weakref

import torch
from torch import Tensor

from engine.hybrid.config import LINEAR, HybridConfig

_MIN_ROWS = 8
_MIN_CAPACITY = 64


class StatePool:
    """Per GDN layer, conv windows (N, C, K-1) in the model's dtype and recurrent states
    (N, Hv, Dk, Dv) in fp32; per attention layer, keys and values (N, Hkv, capacity, D)
    in the model's dtype. N rows and the KV capacity each grow by doubling. Rows are handed
    out in runs and come back when their owner is collected."""

    @torch.inference_mode()
    def __init__(self, config: HybridConfig, dtype: torch.dtype,
                 device: torch.device | str, rows: int = _MIN_ROWS) -> None:
        layers = sum(kind == LINEAR for kind in config.layer_types)
        attention_layers = len(config.layer_types) - layers
        self.capacity = _MIN_CAPACITY
        kv_row = (config.num_key_value_heads, self.capacity, config.head_dim)

        def empty(count: int, row: tuple[int, ...], kind: torch.dtype) -> list[Tensor]:
            return [torch.zeros(0, *row, dtype=kind, device=device) for _ in range(count)]

        self.conv = empty(layers, (config.conv_dim, config.linear_conv_kernel_dim - 1), dtype)
        self.recurrent = empty(layers, (config.linear_num_value_heads,
                                        config.linear_key_head_dim,
                                        config.linear_value_head_dim), torch.float32)
        self.keys = empty(attention_layers, kv_row, dtype)
        self.values = empty(attention_layers, kv_row, dtype)
        self._rows = 0
        self._free: set[int] = set()
        self._grow(rows)

    def take(self, owner: object, n: int) -> int:
        """A run of `n` zeroed rows for `owner`, returned to the pool once the owner is
        collected; its first row's index."""
        start = next((i for i in sorted(self._free)
                      if all(i + j in self._free for j in range(n))), None)
        if start is None:
            start = self._rows
            self._grow(max(2 * self._rows, self._rows + n))
        run = range(start, start + n)
        self._free.difference_update(run)
        self.zero(start, n)
        weakref.finalize(owner, self._free.update, run)
        return start

    @torch.inference_mode()
    def zero(self, start: int, n: int) -> None:
        """Zero the GDN state of rows start..start+n-1 (KV entries are valid only below a
        state's position, so they need no clearing)."""
        for t in (*self.conv, *self.recurrent):
            t[start:start + n].zero_()

    @torch.inference_mode()
    def reserve(self, positions: int) -> None:
        """Make every KV row hold at least `positions` entries."""
        if positions <= self.capacity:
            return
        capacity = max(positions, 2 * self.capacity)
        self.keys, self.values = ([enlarged(t, t.shape[0], t.shape[1], capacity, t.shape[3])
                                   for t in kv] for kv in (self.keys, self.values))
        self.capacity = capacity

    @torch.inference_mode()
    def copy_rows(self, source: int, target: int, n: int, positions: int) -> None:
        """Copy rows source.. onto rows target.. (n rows): GDN state whole, KV entries
        below `positions`."""
        for t in (*self.conv, *self.recurrent):
            t[target:target + n] = t[source:source + n]
        for t in (*self.keys, *self.values):
            t[target:target + n, :, :positions] = t[source:source + n, :, :positions]

    @torch.inference_mode()
    def _grow(self, rows: int) -> None:
        """Reallocate every layer's tensor with `rows` rows, keeping the rows held."""
        self.conv, self.recurrent, self.keys, self.values = (
            [enlarged(t, rows, *t.shape[1:]) for t in layers]
            for layers in (self.conv, self.recurrent, self.keys, self.values))
        self._free.update(range(self._rows, rows))
        self._rows = rows


def enlarged(t: Tensor, *shape: int) -> Tensor:
    """`t` in a zeroed tensor of `shape` (no dim smaller than t's), at its start."""
    out = t.new_zeros(shape)
    out[tuple(slice(0, n) for n in t.shape)] = t
    return out
