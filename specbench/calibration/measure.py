"""The calibration's measurements: the grid of backend operations timed on the torch
backend, the model's physical sizes as a `CostProfile`, and the machine they ran on."""

from __future__ import annotations

import os
import platform
import random
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.backend import Keep
from engine.hybrid.config import FULL as FULL_ATTENTION
from engine.sim.costs import CostProfile
from specbench.calibration.fit import Point
from specbench.common import BenchOptions

if TYPE_CHECKING:
    from engine.hybrid.backend import TorchBackend
    from engine.hybrid.state import HybridState

BYTE_TOKENS = 256  # byte ids: ordinary tokens of the shipped tokenizer, never specials


@dataclass(frozen=True)
class Grid:
    """What is measured: verify batches (k + 1) at each context, prefill lengths, input
    replays over each batch size, `repeat` samples per point (and as many runs of each
    validation conversation, one after each pass), and the answer cap of the validation
    conversations."""

    batches: tuple[int, ...]
    contexts: tuple[int, ...]
    prefills: tuple[int, ...]
    repeat: int
    answer_tokens: int


FULL = Grid(batches=tuple(range(1, 18)), contexts=(0, 256, 512, 1024, 2048),
            prefills=(16, 64, 256, 512, 1024, 2048), repeat=7, answer_tokens=128)
QUICK = Grid(batches=(1, 4, 9), contexts=(0, 64), prefills=(16, 64), repeat=2,
             answer_tokens=16)


def points_of(grid: Grid) -> list[tuple[str, int, int]]:
    """Every (operation, batch, context) the grid measures."""
    out = [(op, b, c) for c in grid.contexts for op in ("verify_live", "verify_per_token",
                                                          "verify_deferred")
           for b in grid.batches]
    out += [(op, 1, c) for c in grid.contexts for op in ("snapshot", "restore")]
    out += [(op, b, grid.contexts[0]) for op in ("select", "replay_inputs")
            for b in grid.batches]
    out += [("prefill", n, 0) for n in grid.prefills]
    return out


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(threads: int, device: str) -> dict[str, Any]:
    """Where the profile was measured."""
    import torch

    return {"cpu": cpu_name(), "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "device": device, "threads": threads,
            "gpu": torch.cuda.get_device_name() if device == "cuda" else None}


def physical_profile(backend: TorchBackend, model: str, name: str) -> CostProfile:
    """The model's sizes as a profile called `name`; its rates are placeholders until
    fitted."""
    m = backend.model
    cfg = m.config
    params = sum(p.numel() for p in m.parameters())
    elem = m.embed_tokens.weight.element_size()
    n_full = sum(kind == FULL_ATTENTION for kind in cfg.layer_types)
    state = backend.new_state()
    kept = backend.verify(state, [1, 2], Keep.INPUTS).kept
    return CostProfile(
        name=name,
        weight_bytes=float(sum(p.numel() * p.element_size() for p in m.parameters())),
        hbm_bw=1e10,
        flops_per_token=2.0 * params,  # a multiply-add per weight
        peak_flops=1e10,
        kv_bytes_per_token=float(n_full * 2 * cfg.num_key_value_heads * cfg.head_dim * elem),
        state_bytes=float(backend.state_bytes()),
        copy_bw=1e10,
        launch_s=1e-3,
        description=f"{model} (torch backend) on {cpu_name()}",
        input_bytes_per_token=kept.nbytes / kept.length,
    )


Thunk = Callable[[], object]
# The measured verify forwards, by what they keep (the cost profile's names).
_VERIFY = {"verify_live": Keep.NOTHING, "verify_per_token": Keep.PER_TOKEN,
           "verify_deferred": Keep.INPUTS}


def _thunk(backend: TorchBackend, state: HybridState, op: str, tokens: list[int]) -> Thunk:
    """Prepare one sample of `op` (untimed) and return the call to time."""
    if op.startswith("verify_"):
        keep = _VERIFY[op]
        return lambda: backend.verify(state, tokens, keep)
    if op == "snapshot":
        return lambda: backend.snapshot(state)
    if op == "restore":
        snap = backend.snapshot(state)
        backend.verify(state, tokens, Keep.NOTHING)
        return lambda: backend.restore(state, snap)
    if op == "select":
        kept = backend.verify(state, tokens, Keep.PER_TOKEN).kept
        return lambda: backend.select(state, kept, len(tokens) - 1)
    if op == "replay_inputs":
        kept = backend.verify(state, tokens, Keep.INPUTS).kept
        return lambda: backend.replay_inputs(state, kept, len(tokens))
    if op == "prefill":
        fresh = backend.new_state()
        return lambda: backend.prefill(fresh, tokens)
    raise ValueError(f"no measurement for operation '{op}'")


def measure(backend: TorchBackend, grid: Grid, seed: int, opts: BenchOptions,
            between: Callable[[], object] | None = None) -> list[Point]:
    """Median seconds of every grid point. Each repeat goes round the whole grid in a
    new random order rather than one point at a time, so a burst of load from other
    processes spreads over many points' samples instead of taking all of a few points'.
    `between` runs after every kept pass (the validation conversations)."""
    rng = random.Random(seed)
    states: dict[int, HybridState] = {}
    for ctx in grid.contexts:
        states[ctx] = backend.new_state()
        if ctx:
            backend.prefill(states[ctx], [rng.randrange(BYTE_TOKENS) for _ in range(ctx)])
    plan = points_of(grid)
    tokens = {(op, b, c): [rng.randrange(BYTE_TOKENS) for _ in range(b)] for op, b, c in plan}
    samples: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    for r in range(grid.repeat + 1):  # the first pass warms up and is not kept
        opts.log(f"calibration: pass {r + 1}/{grid.repeat + 1} over {len(plan)} points")
        for key in rng.sample(plan, len(plan)):
            op, _, ctx = key
            state = states[ctx]
            snap = backend.snapshot(state)
            call = _thunk(backend, state, op, tokens[key])
            start = backend.now()  # the backend's clock waits for queued device work
            call()
            took = backend.now() - start
            backend.restore(state, snap)
            if r:
                samples[key].append(took)
        if r and between is not None:
            between()
    return [Point(op, b, c, statistics.median(samples[op, b, c])) for op, b, c in plan]
