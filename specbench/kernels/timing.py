"""Timing and traffic helpers for the GPU benchmark (torch only; CUDA touched lazily).

Times are device times of one call with a cold L2: a model runs dozens of layers between
two visits to the same layer's state, so a warm-cache number would flatter every kernel.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable

import torch


class Timer:
    """Median milliseconds of ``fn()``; the base class times on the host (CPU smoke runs)."""

    def __init__(self, target_ms: float = 30.0, min_reps: int = 5, max_reps: int = 100) -> None:
        self.target_ms = target_ms
        self.min_reps = min_reps
        self.max_reps = max_reps

    def _reps(self, estimate_ms: float) -> int:
        """Enough repetitions to fill ``target_ms``, within [min_reps, max_reps]."""
        return max(self.min_reps, min(self.max_reps, int(self.target_ms / max(estimate_ms, 1e-3))))

    def __call__(self, fn: Callable[[], object]) -> float:
        """Run once to warm up (compile), then return the median of timed runs in ms."""
        def once() -> float:
            start = time.perf_counter()
            fn()
            return (time.perf_counter() - start) * 1e3

        fn()
        times = [once()]
        times += [once() for _ in range(self._reps(times[0]) - 1)]
        return statistics.median(times)


class CudaTimer(Timer):
    """CUDA-event timing, flushing L2 with a 256 MiB write before every run."""

    def __init__(self, flush_mib: int = 256, **kwargs: float) -> None:
        super().__init__(**kwargs)
        self.flush = torch.empty(flush_mib * 2**20 // 4, dtype=torch.int32, device="cuda")

    def __call__(self, fn: Callable[[], object]) -> float:
        """Warm up, estimate, then time each run between events after an L2 flush."""
        fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        reps = self._reps((time.perf_counter() - start) * 1e3)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for s, e in zip(starts, ends, strict=True):
            # The flush also gives the host a head start: the launch overhead of fn hides
            # behind it, so the interval is device time.
            self.flush.zero_()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))


def nbytes(tensors: Iterable[torch.Tensor | None]) -> int:
    """Bytes of the given tensors' elements (views count their own extent, not the base)."""
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def gbps(num_bytes: float, ms: float) -> float:
    """Achieved bandwidth in GB/s (10^9 bytes per second)."""
    return num_bytes / (ms * 1e-3) / 1e9 if ms > 0 else float("nan")


def copy_bandwidth(timer: Timer, num_bytes: int, device: torch.device) -> dict[str, float]:
    """Device-to-device copy of ``num_bytes``: the yardstick every kernel is compared with.

    Counts read plus write, as the kernels' traffic does.
    """
    src = torch.empty(num_bytes // 4, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    ms = timer(lambda: dst.copy_(src))
    moved = 2 * src.numel() * 4
    return {"bytes": moved, "ms": ms, "gbps": gbps(moved, ms)}
