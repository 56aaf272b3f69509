"""`StatePool`: the recurrent and conv state of every GDN layer for all of a model's
sequences, one tensor per layer with a row per sequence. A `HybridState` owns a run of
rows (one per batch entry) and sees them as views; a batched verify reads and writes the
rows of all its sequences by index, without concatenating per-sequence tensors."""

import weakref

import torch
from torch import Tensor

from engine.hybrid.config import LINEAR, HybridConfig

_MIN_ROWS = 8


class StatePool:
    """Per GDN layer, conv windows (N, C, K-1) in the model's dtype and recurrent states
    (N, Hv, Dk, Dv) in fp32, N rows grown by doubling. Rows are handed out in runs and
    come back when their owner is collected."""

    @torch.inference_mode()
    def __init__(self, config: HybridConfig, dtype: torch.dtype,
                 device: torch.device | str, rows: int = _MIN_ROWS) -> None:
        self.layers = sum(kind == LINEAR for kind in config.layer_types)
        self._conv_row = (config.conv_dim, config.linear_conv_kernel_dim - 1)
        self._recurrent_row = (config.linear_num_value_heads, config.linear_key_head_dim,
                               config.linear_value_head_dim)
        self._dtype, self._device = dtype, device
        self.conv: list[Tensor] = []
        self.recurrent: list[Tensor] = []
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
        """Zero rows start..start+n-1 of every layer."""
        for t in (*self.conv, *self.recurrent):
            t[start:start + n].zero_()

    @torch.inference_mode()
    def _grow(self, rows: int) -> None:
        """Reallocate every layer's tensor with `rows` rows, keeping the rows held."""
        def grown(old: list[Tensor], row: tuple[int, ...], dtype: torch.dtype) -> list[Tensor]:
            out = []
            for i in range(self.layers):
                t = torch.zeros(rows, *row, dtype=dtype, device=self._device)
                if old:
                    t[:self._rows] = old[i]
                out.append(t)
            return out

        self.conv = grown(self.conv, self._conv_row, self._dtype)
        self.recurrent = grown(self.recurrent, self._recurrent_row, torch.float32)
        self._free.update(range(self._rows, rows))
        self._rows = rows
