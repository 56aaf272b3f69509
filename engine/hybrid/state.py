"""Per-sequence state of the hybrid model and the operations every rollback strategy is
built from: snapshot/restore (`checkpoint`), select (`per_token`), replay of recorded
inputs (`input_replay`), trim (the attention half of every strategy, and all of `none`),
and digests that say whether two states are the same."""

import copy
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

from engine.hybrid.config import HybridConfig
from engine.hybrid.errors import StateError
from engine.hybrid.gdn import LayerInputs, LayerStates, replay_inputs_
from engine.hybrid.pool import StatePool, enlarged
from speckernels import ops
from speckernels.backend import KernelBackend

_MIN_STAMPS = 64


@dataclass(frozen=True)
class StateSnapshot:
    """A deep copy of the recurrent + conv state and the KV length. KV entries are not
    copied: positions below `position` stay valid unless rewritten, which restore checks."""

    position: int
    epoch: int
    conv: tuple[Tensor, ...]
    recurrent: tuple[Tensor, ...]

    @property
    def nbytes(self) -> int:
        """Bytes the snapshot copied."""
        return sum(t.nbytes for t in (*self.conv, *self.recurrent))


@dataclass(frozen=True)
class TokenStates:
    """Per-position GDN states of one verify batch (`per_token`), one entry per GDN layer."""

    start: int
    length: int
    layers: tuple[LayerStates, ...]

    @property
    def nbytes(self) -> int:
        """Bytes held (the strategy's memory cost)."""
        return sum(x.recurrent.nbytes + x.conv.nbytes for x in self.layers)


@dataclass(frozen=True)
class RecordedInputs:
    """Per-position GDN inputs of one verify batch (`input_replay`), one per GDN layer."""

    start: int
    length: int
    layers: tuple[LayerInputs, ...]

    @property
    def nbytes(self) -> int:
        """Bytes held (the strategy's memory cost)."""
        return sum(t.nbytes for x in self.layers
                   for t in (x.q, x.k, x.v, x.g, x.beta, x.conv_in))


class HybridState:
    """KV cache of the attention layers, conv window and recurrent matrix of the GDN layers,
    and `position`: how many tokens the state has consumed (= the KV length). The tensors
    are inference tensors: change them through these methods or under inference_mode."""

    @torch.inference_mode()
    def __init__(
        self, config: HybridConfig, batch_size: int = 1, dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu", pool: StatePool | None = None,
    ) -> None:
        self.config = config
        self.batch_size = batch_size
        # Every layer's state lives in `pool` (rows index..index+batch_size-1; a pool of
        # its own when none is given); `conv`, `recurrent`, `keys` and `values` are views.
        self.pool = StatePool(config, dtype, device, batch_size) if pool is None else pool
        self.index = self.pool.take(self, batch_size)
        # stamp[p] = epoch of the last write at KV position p; a snapshot is stale once a
        # position below its length carries a newer stamp.
        self._stamp = torch.zeros(_MIN_STAMPS, dtype=torch.long)
        self._epoch = 0
        self._position = 0

    def _mine(self, layers: list[Tensor]) -> list[Tensor]:
        """This state's rows of each layer's pool tensor, as views."""
        return [t[self.index:self.index + self.batch_size] for t in layers]

    @property
    def conv(self) -> list[Tensor]:
        """Each GDN layer's conv window (B, C, K-1), a view of the pool."""
        return self._mine(self.pool.conv)

    @property
    def recurrent(self) -> list[Tensor]:
        """Each GDN layer's recurrent state (B, Hv, Dk, Dv) fp32, a view of the pool."""
        return self._mine(self.pool.recurrent)

    @property
    def keys(self) -> list[Tensor]:
        """Each attention layer's keys (B, Hkv, capacity, D), a view of the pool."""
        return self._mine(self.pool.keys)

    @property
    def values(self) -> list[Tensor]:
        """Each attention layer's values (B, Hkv, capacity, D), a view of the pool."""
        return self._mine(self.pool.values)

    @property
    def position(self) -> int:
        """Tokens consumed by the state; also the number of valid KV entries."""
        return self._position

    @property
    def state_bytes(self) -> int:
        """Bytes of the recurrent + conv state (what one checkpoint copies)."""
        return sum(t.nbytes for t in (*self.conv, *self.recurrent))

    @torch.inference_mode()
    def claim(self, length: int) -> int:
        """Make room for `length` KV entries after `position` and stamp them as rewritten;
        returns the start position. Called by the model before it writes."""
        start, end = self._position, self._position + length
        self.pool.reserve(end)
        if end > self._stamp.shape[0]:
            self._stamp = enlarged(self._stamp, max(end, 2 * self._stamp.shape[0]))
        self._epoch += 1
        self._stamp[start:end] = self._epoch
        return start

    def advance(self, length: int) -> None:
        """Mark `length` claimed positions as consumed. Called by the model."""
        self._position += length

    @torch.inference_mode()
    def snapshot(self) -> StateSnapshot:
        """A restorable copy (the `checkpoint` strategy)."""
        return StateSnapshot(
            position=self._position, epoch=self._epoch,
            conv=tuple(t.clone() for t in self.conv),
            recurrent=tuple(t.clone() for t in self.recurrent),
        )

    @torch.inference_mode()
    def restore(self, snap: StateSnapshot) -> None:
        """Bring the state back to `snap`; fails if KV entries it relies on were rewritten."""
        if len(snap.conv) != len(self.conv):
            raise StateError("snapshot belongs to a model with a different layer layout")
        if snap.position and int(self._stamp[:snap.position].max()) > snap.epoch:
            raise StateError(
                f"KV entries below position {snap.position} were rewritten after the snapshot "
                f"was taken; restore an older snapshot or re-prefill"
            )
        for live, saved in zip(self.conv + self.recurrent, snap.conv + snap.recurrent,
                               strict=True):
            live.copy_(saved)
        self._position = snap.position

    def trim(self, length: int) -> None:
        """Cut the KV cache to `length` tokens. The recurrent and conv state are left as
        they are: they cannot be trimmed, which is the whole problem (strategy `none`)."""
        if not 0 <= length <= self._position:
            raise StateError(f"cannot trim to {length}: the state holds {self._position} tokens")
        self._position = length

    @torch.inference_mode()
    def select(self, kept: TokenStates, index: int,
               kernels: KernelBackend = KernelBackend.TORCH) -> None:
        """`per_token` commit: the state after verify-batch position `index` becomes live
        (accepting `index` drafts consumes index + 1 tokens)."""
        if self._position != kept.start + kept.length:
            raise StateError(
                f"per-token states were captured for positions {kept.start}.."
                f"{kept.start + kept.length}, but the state is at {self._position}"
            )
        _check_index(index, kept.length)
        accept = torch.full((self.batch_size,), index, dtype=torch.long,
                            device=self.recurrent[0].device)
        for conv, recurrent, layer in zip(self.conv, self.recurrent, kept.layers, strict=True):
            ops.gdn_commit(recurrent, layer.recurrent, accept, conv_state=conv,
                           conv_intermediate=layer.conv.contiguous(), backend=kernels)
        self._position = kept.start + index + 1

    @torch.inference_mode()
    def replay_inputs(self, recorded: RecordedInputs, n: int,
                      kernels: KernelBackend = KernelBackend.TORCH) -> None:
        """`input_replay` commit: advance the recurrence and conv window over the first `n`
        recorded positions (their KV entries were written by the verify forward)."""
        if self._position != recorded.start:
            raise StateError(
                f"inputs were recorded from position {recorded.start}, "
                f"but the state is at {self._position}"
            )
        _check_index(n - 1, recorded.length)
        for conv, recurrent, layer in zip(self.conv, self.recurrent, recorded.layers,
                                          strict=True):
            replay_inputs_(conv, recurrent, layer, n, kernels)
        self._position = recorded.start + n

    @torch.inference_mode()
    def reset(self) -> None:
        """Forget everything (position 0)."""
        self.pool.zero(self.index, self.batch_size)
        self._position = 0

    @torch.inference_mode()
    def copy(self) -> "HybridState":
        """An independent deep copy (KV included)."""
        twin = copy.copy(self)
        twin.index = self.pool.take(twin, self.batch_size)
        self.pool.copy_rows(self.index, twin.index, self.batch_size, self._position)
        twin._stamp = self._stamp.clone()
        return twin

    def tensors(self) -> Iterator[Tensor]:
        """Every tensor that defines the state, KV cut to `position`, in a fixed order."""
        yield from self.recurrent
        yield from self.conv
        for keys, values in zip(self.keys, self.values, strict=True):
            yield keys[:, :, :self._position]
            yield values[:, :, :self._position]

    def digest(self, bits: int | None = None) -> str:
        """sha256 of the position and every state tensor. Exact (`bits=None`): the raw bytes.
        Tolerant: each tensor rounded to `bits` significant bits under a shared per-tensor
        exponent (its largest magnitude), so last-bit differences from another kernel or
        device vanish unless a value sits at a rounding boundary."""
        if bits is not None and not 1 <= bits <= 24:
            raise StateError(f"tolerant digest bits must be in 1..24, got {bits}")
        h = hashlib.sha256(f"position={self._position};bits={bits}".encode())
        for t in self.tensors():
            h.update(repr((tuple(t.shape), str(t.dtype))).encode())
            h.update(_quantize(t, bits) if bits is not None else _raw_bytes(t))
        return h.hexdigest()

    def diff(self, other: "HybridState") -> float:
        """Largest |a - b| over all state tensors, relative to the largest |b| of that
        tensor (0.0 when identical); positions must match."""
        if other.position != self._position:
            raise StateError(f"positions differ: {self._position} vs {other.position}")
        worst = 0.0
        for a, b in zip(self.tensors(), other.tensors(), strict=True):
            if a.numel():
                scale = float(b.abs().max()) or 1.0
                worst = max(worst, float((a.float() - b.float()).abs().max()) / scale)
        return worst


def _check_index(index: int, length: int) -> None:
    if not 0 <= index < length:
        raise StateError(f"batch index {index} out of range for a batch of {length}")


def _raw_bytes(t: Tensor) -> bytes:
    return t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()


def _quantize(t: Tensor, bits: int) -> bytes:
    x = t.detach().float().cpu()
    peak = float(x.abs().max()) if x.numel() else 0.0
    if peak == 0.0:
        return bytes(x.numel())
    _, exponent = torch.frexp(torch.tensor(peak))
    scaled = torch.round(x * 2.0 ** (bits - int(exponent)))  # |scaled| <= 2**bits
    return scaled.to(torch.int32).numpy().tobytes()
