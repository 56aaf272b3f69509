"""Measurements behind ``bench/kernels_gpu.py``: correctness checks, then per-layer timings.

Every time is one GDN layer's device time with a cold L2 unless the name says otherwise
(``commit_all_layers``: all L layers in one launch). Byte counts are the minimum traffic
of each operation (inputs read once, outputs written once), so GB/s is achieved bandwidth.
Imports triton only through ``speckernels.ops`` and the kernel modules, at run time.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from specbench.kernels.checks import FlaBaseline, run_checks
from specbench.kernels.report import evaluate_goals
from specbench.kernels.timing import CudaTimer, Timer, copy_bandwidth, gbps, nbytes
from speckernels import ops

VERIFY_TILINGS = [(8, 1), (16, 1), (16, 2), (32, 2), (32, 4), (64, 4)]  # (BV, num_warps)
COMMIT_TILINGS = [(1024, 4), (2048, 4), (4096, 8), (8192, 8)]  # (BLOCK, num_warps)


@dataclass(frozen=True)
class Shape:
    """GDN layer geometry; defaults are Qwen3.5-27B's (48 layers, 16 q/k and 32 v heads)."""

    layers: int = 48
    heads: int = 16
    value_heads: int = 32
    head_dim: int = 128
    conv_taps: int = 4
    conv_window: int = 3

    @property
    def channels(self) -> int:
        """Conv channels: q, k and v projections side by side."""
        return (2 * self.heads + self.value_heads) * self.head_dim


def make_inputs(shape: Shape, bsz: int, seq: int, device: torch.device) -> SimpleNamespace:
    """Random verify-batch inputs in the model's dtypes (bf16 activations, fp32 g and state)."""
    h, hv, d, c = shape.heads, shape.value_heads, shape.head_dim, shape.channels
    bf16 = torch.bfloat16

    def unit(*size: int) -> torch.Tensor:
        return F.normalize(torch.randn(*size, device=device), dim=-1).to(bf16)

    return SimpleNamespace(
        q=unit(bsz, seq, h, d),
        k=unit(bsz, seq, h, d),
        v=torch.randn(bsz, seq, hv, d, device=device).to(bf16),
        g=-F.softplus(torch.randn(bsz, seq, hv, device=device)) * 0.5,
        beta=torch.rand(bsz, seq, hv, device=device).to(bf16),
        state=0.1 * torch.randn(bsz, hv, d, d, device=device),
        x=torch.randn(bsz, seq, c, device=device).to(bf16).transpose(1, 2),  # (B, C, T) view
        conv_state=torch.randn(bsz, c, shape.conv_window, device=device).to(bf16),
        weight=(0.5 * torch.randn(c, shape.conv_taps, device=device)).to(bf16),
    )


def _verify_case(x, seq: int, timer: Timer, fla: FlaBaseline | None, sweep) -> dict:
    """Verify variants at T = seq for one layer: ms, bytes, GB/s, tiling sweep."""
    from speckernels.gdn_verify import gdn_verify_triton

    q, k, v, g, beta = (t[:, :seq].contiguous() for t in (x.q, x.k, x.v, x.g, x.beta))
    state = x.state
    bsz, _, hv, dv = v.shape
    inter = torch.empty(bsz, seq, hv, state.shape[2], dv, device=v.device)  # (B, T, HV, K, V)
    out = torch.empty_like(v)
    pair = torch.cat([state, state])  # (2B, HV, K, V): live slots then spares
    spare = torch.arange(bsz, 2 * bsz, device=v.device)
    run = {
        "plain": lambda: ops.gdn_verify(q, k, v, g, beta, state, save_intermediate=False,
                                        commit=True, out=out),
        "per_token": lambda: ops.gdn_verify(q, k, v, g, beta, state, intermediate=inter, out=out),
        "deferred": lambda: ops.gdn_verify(q, k, v, g, beta, state, save_intermediate=False,
                                           out=out),
        "pingpong": lambda: ops.gdn_verify(q, k, v, g, beta, pair, save_intermediate=False,
                                           commit=True, dst_indices=spare, out=out),
        "torch_ref": lambda: ops.gdn_verify(q, k, v, g, beta, state, intermediate=inter,
                                            backend="torch"),
    }  # fmt: skip
    if fla is not None:
        run["fla"] = lambda: fla(q, k, v, g, beta, state)
    ms = {name: timer(fn) for name, fn in run.items()}
    io = nbytes((q, k, v, g, beta, out))
    s = nbytes([state])
    traffic = {"plain": io + 2 * s, "per_token": io + s + nbytes([inter]), "deferred": io + s,
               "pingpong": io + 2 * s, "torch_ref": io + s + nbytes([inter]),
               "fla": io + 2 * s}  # fmt: skip
    tilings = []
    slots = torch.arange(bsz, device=v.device, dtype=torch.int32)
    for bv, nw in sweep:
        kw = {"scale": q.shape[-1] ** -0.5, "use_qk_l2norm": False, "eps": 1e-6,
              "block_v": bv, "num_warps": nw}  # fmt: skip
        pt = timer(lambda kw=kw: gdn_verify_triton(q, k, v, g, beta, state, slots, out, inter,
                                                   commit=False, **kw))  # fmt: skip
        pl = timer(lambda kw=kw: gdn_verify_triton(q, k, v, g, beta, state, slots, out, None,
                                                   commit=True, **kw))  # fmt: skip
        tilings.append({"block_v": bv, "num_warps": nw, "per_token_ms": pt, "plain_ms": pl})
    return {
        "ms": ms,
        "bytes": {n: traffic[n] for n in ms},
        "gbps": {n: gbps(traffic[n], ms[n]) for n in ms},
        "tilings": tilings,
    }


def _conv_case(x, seq: int, timer: Timer) -> dict:
    """Conv update variants at T = seq for one layer."""
    xin = x.x[:, :, :seq]  # (B, C, T) view of the (B, T, C) projection
    cs, w = x.conv_state, x.weight
    wins = torch.empty(*xin.shape[:1], seq, xin.shape[1], cs.shape[2], device=cs.device,
                       dtype=cs.dtype)  # (B, T, C, S)  # fmt: skip
    pair = torch.cat([cs, cs])  # live windows then spares
    spare = torch.arange(cs.shape[0], 2 * cs.shape[0], device=cs.device)
    run = {
        "per_token": lambda: ops.conv_update(xin, cs, w, intermediate=wins),
        "plain": lambda: ops.conv_update(xin, cs, w, save_intermediate=False, commit=True),
        "deferred": lambda: ops.conv_update(xin, cs, w, save_intermediate=False),
        "pingpong": lambda: ops.conv_update(xin, pair, w, save_intermediate=False, commit=True,
                                            dst_indices=spare),
        "torch_ref": lambda: ops.conv_update(xin, cs, w, intermediate=wins, backend="torch"),
    }
    return {"ms": {name: timer(fn) for name, fn in run.items()}}


def _commit_case(x, seq: int, timer: Timer) -> dict:
    """per_token commit of one layer, all rows committing (random accepted positions)."""
    state, cs = x.state, x.conv_state
    bsz = state.shape[0]
    inter = torch.randn(bsz, seq, *state.shape[1:], device=state.device)
    wins = torch.randn(bsz, seq, *cs.shape[1:], device=cs.device).to(cs.dtype)
    accept = torch.randint(0, seq, (bsz,), device=state.device)
    ms = timer(lambda: ops.gdn_commit(state, inter, accept, conv_state=cs, conv_intermediate=wins))
    moved = 2 * nbytes((state, cs))
    return {"ms": ms, "bytes": moved, "gbps": gbps(moved, ms)}


def _all_layers_commit(shape: Shape, x, timer: Timer, sweep) -> dict:
    """One launch committing every layer's recurrent and conv state for the whole batch.

    The per-position buffers are expanded over T (stride 0): the bytes read per row are
    real, without allocating T copies of every layer's state.
    """
    from speckernels.gdn_commit import gdn_commit_triton

    state, cs = x.state, x.conv_state
    bsz, L = state.shape[0], shape.layers
    moved = 2 * L * nbytes((state, cs))
    same = copy_bandwidth(timer, moved // 2, state.device)  # before the big buffers exist
    big = torch.empty(L, *state.shape, device=state.device)  # (L, B, HV, K, V)
    src = torch.randn(L, bsz, 1, *state.shape[1:], device=state.device)
    cbig = torch.empty(L, *cs.shape, device=cs.device, dtype=cs.dtype)  # (L, B, C, S)
    csrc = torch.randn(L, bsz, 1, *cs.shape[1:], device=cs.device).to(cs.dtype)
    seq = 4
    inter = src.expand(-1, -1, seq, *src.shape[3:])  # (L, B, T, HV, K, V), T stride 0
    wins = csrc.expand(-1, -1, seq, *csrc.shape[3:])
    accept = torch.randint(0, seq, (bsz,), device=state.device)
    ms = timer(lambda: ops.gdn_commit(big, inter, accept, conv_state=cbig, conv_intermediate=wins))
    slots = torch.arange(bsz, device=state.device, dtype=torch.int32)
    acc32 = accept.to(torch.int32)
    tilings = [
        {"block": blk, "num_warps": nw, "ms": timer(lambda blk=blk, nw=nw: gdn_commit_triton(
            big, inter, acc32, slots, cbig, wins, block=blk, num_warps=nw))}
        for blk, nw in sweep
    ]  # fmt: skip
    return {"ms": ms, "bytes": moved, "gbps": gbps(moved, ms), "same_bytes_copy": same,
            "tilings": tilings}  # fmt: skip


def _strategy_parts(x, kmax: int, timer: Timer) -> dict:
    """Pieces of the checkpoint and input_replay commits for one layer, per accepted count.

    checkpoint: save (copy state+conv rows out), restore (copy back), forward over the first
    T' positions (conv + recurrence, committing). input_replay: replay of positions 0..j of
    the recorded inputs (recurrence + conv window).
    """
    state, cs = x.state, x.conv_state
    idx = torch.arange(state.shape[0], device=state.device)
    ck, ckc = torch.empty_like(state), torch.empty_like(cs)

    def save() -> None:
        torch.index_select(state, 0, idx, out=ck)
        torch.index_select(cs, 0, idx, out=ckc)

    def restore() -> None:
        state.index_copy_(0, idx, ck)
        cs.index_copy_(0, idx, ckc)

    parts = {"save_ms": timer(save), "restore_ms": timer(restore), "forward_ms": {},
             "replay_ms": {}}  # fmt: skip
    for n in range(1, kmax + 2):
        q, k, v, g, beta = (t[:, :n] for t in (x.q, x.k, x.v, x.g, x.beta))
        xin = x.x[:, :, :n]
        fwd = timer(lambda q=q, k=k, v=v, g=g, beta=beta: ops.gdn_verify(
            q, k, v, g, beta, state, save_intermediate=False, commit=True))  # fmt: skip
        conv = timer(lambda xin=xin: ops.conv_update(xin, cs, x.weight, save_intermediate=False,
                                                     commit=True))  # fmt: skip
        parts["forward_ms"][n] = fwd + conv
        acc = torch.full((state.shape[0],), n - 1, device=state.device)
        rep = timer(lambda acc=acc: ops.gdn_replay(x.k, x.v, x.g, x.beta, state, acc))
        crep = timer(lambda acc=acc: ops.conv_replay(x.x, cs, acc))
        parts["replay_ms"][n - 1] = rep + crep
    return parts


def measure_batch(shape: Shape, bsz: int, drafts: list[int], timer: Timer,
                  fla: FlaBaseline | None, sweeps: tuple) -> tuple[list[dict], dict]:  # fmt: skip
    """All timings for one batch size: one case per draft length, plus the shared parts."""
    device = torch.device("cuda" if isinstance(timer, CudaTimer) else "cpu")
    kmax = max(drafts)
    x = make_inputs(shape, bsz, kmax + 1, device)
    cases = []
    for k in drafts:
        seq = k + 1
        cases.append({
            "batch": bsz, "draft": k, "T": seq,
            "verify": _verify_case(x, seq, timer, fla, sweeps[0]),
            "conv": _conv_case(x, seq, timer),
            "commit_layer": _commit_case(x, seq, timer),
        })  # fmt: skip
    parts = _strategy_parts(x, kmax, timer)
    parts["batch"] = bsz
    parts["commit_all_layers"] = _all_layers_commit(shape, x, timer, sweeps[1])
    return cases, parts


def run(args: argparse.Namespace, *, fla, fla_note: str) -> dict:
    """Checks, copy baseline, every batch's timings and the goal verdicts, as one dict."""
    smoke = args.smoke_cpu
    device = torch.device("cpu" if smoke else "cuda")
    timer = Timer(target_ms=0, min_reps=1, max_reps=1) if smoke else CudaTimer()
    shape = Shape(args.layers, args.heads, args.value_heads, args.head_dim, args.conv_taps,
                  args.conv_window)  # fmt: skip
    sweeps = ((VERIFY_TILINGS[:1], COMMIT_TILINGS[:1]) if smoke or args.no_sweep
              else (VERIFY_TILINGS, COMMIT_TILINGS))  # fmt: skip
    baseline = FlaBaseline(fla) if fla is not None else None
    started = time.perf_counter()
    meta = {
        "device": "cpu (Triton interpreter smoke run)" if smoke else torch.cuda.get_device_name(),
        "torch": torch.__version__, "triton": _triton_version(), "fla": fla_note,
        "shape": asdict(shape), "channels": shape.channels, "batches": args.batch_list,
        "drafts": args.draft_list, "timing": "median device ms per call, L2 flushed",
    }  # fmt: skip
    copy = copy_bandwidth(timer, 2**20 if smoke else 2**30, device)
    checks = run_checks(shape, device, baseline, VERIFY_TILINGS if not smoke else sweeps[0],
                        make_inputs, smoke=smoke)  # fmt: skip
    if any(c["name"].startswith("fla.") and not c["ok"] for c in checks):
        baseline = None  # a baseline that disagrees with the reference is not timed
    cases, parts, skipped = [], [], []
    for bsz in args.batch_list:
        if time.perf_counter() - started > args.budget_s:
            skipped.append(bsz)
            continue
        c, p = measure_batch(shape, bsz, args.draft_list, timer, baseline, sweeps)
        cases += c
        parts.append(p)
        if not smoke:
            torch.cuda.empty_cache()
    meta["fla_mode"] = baseline.mode if baseline is not None else None
    meta["skipped_batches_over_budget"] = skipped
    report = {"meta": meta, "copy": copy, "checks": checks, "cases": cases, "strategy_parts": parts}
    report["goals"] = evaluate_goals(report)
    return report


def _triton_version() -> str:
    """Installed triton version (imported here only for the report)."""
    import triton

    return triton.__version__
