"""The llama calibration's model and fit: what the sim charges for a llama-server request,
round by round, under a `CostProfile`, and the profile's rates fitted to llama-server's
timings by non-negative least squares.

The sim's charges (engine/sim/backend.py, engine/sim/costs.py) are linear in the fixed
costs and in the inverse of the memory rate once the compute roofline is left out, so
the fit is linear: `LINEAR` names the unknowns. On a CPU the compute of a forward grows
with its tokens, which `token_s` carries (`peak_flops` is set out of reach). Copies
within memory (device copies, the `per_token` select) run at the memcpy rate measured
on this machine; llama.cpp keeps whole-state checkpoints in host memory
(`checkpoint_place` host, memcpy rate), so what is fitted of a checkpoint is the cost of
each of its blocking tensor copies, `tensor_copy_s` (llama.cpp reads the state out and
writes it back tensor by tensor; `state_tensors` is the model's count: on one model a fixed
cost per checkpoint and a cost per tensor are the same column, so `host_copy_s` stays 0). The n-gram
types have no per-token states (`n_rs_seq` 0): their rounds are the `checkpoint`
strategy's; draft-mtp with `n_rs_seq` is `per_token`'s. Drafting is not a backend
operation: the MTP head's cost per drafted token (`mtp_token_s`) is fitted beside the
profile and added to the sim's time; an n-gram lookup is taken as free.
"""

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from engine.sim.backend import UBATCH
from engine.sim.costs import ROUND_COPIES, CostProfile
from engine.sim.nnls import nnls
from specbench.calibration.llama.measure import Trace

LINEAR = ("launch_s", "inv_hbm_bw", "token_s", "multi_token_s", "round_sync_s",
          "tensor_copy_s", "mtp_token_s")
UNREACHED_FLOPS = 1e18  # compute is in token_s: the roofline's compute side never binds
STRATEGY = {"none": "none", "ngram-mod": "checkpoint", "ngram-simple": "checkpoint",
            "ngram-map-k": "checkpoint", "mtp": "per_token"}
"""Our strategy for each drafter's rounds in llama.cpp (which copies a round makes)."""


@dataclass(frozen=True)
class Row:
    """One measured time: a request's prefill or decode under one drafter."""

    kind: str  # "prefill" or "decode/<drafter>"
    drafter: str
    trace: Trace
    seconds: float


def profile_of(base: CostProfile, theta: Sequence[float]) -> tuple[CostProfile, float]:
    """`base` with the linear unknowns `theta` (`LINEAR`), and the MTP head's seconds
    per drafted token."""
    v = dict(zip(LINEAR, (float(x) for x in theta), strict=True))
    profile = replace(base, launch_s=v["launch_s"], hbm_bw=1.0 / max(v["inv_hbm_bw"], 1e-30),
                      token_s=v["token_s"], multi_token_s=v["multi_token_s"],
                      round_sync_s=v["round_sync_s"], tensor_copy_s=v["tensor_copy_s"],
                      peak_flops=UNREACHED_FLOPS)
    return profile, v["mtp_token_s"]


def prefill_s(p: CostProfile, trace: Trace) -> float:
    """Prompt processing: ubatch forwards and the context checkpoints saved."""
    n = trace.prompt_n
    forwards = sum(p.forward_s(min(UBATCH, n - i), i) for i in range(0, n, UBATCH))
    return forwards + trace.ctx_checkpoints * p.checkpoint_s()


def decode_s(p: CostProfile, trace: Trace, drafter: str, mtp_token_s: float = 0.0) -> float:
    """Generation as the sim charges it (engine/round.py's rounds on the sim backend),
    drafting included: a plain step is one forward; a speculative round saves a
    checkpoint (`checkpoint`), verifies, and on a reject restores and replays the kept
    tokens, or verifies writing per-position states and selects one (`per_token`)."""
    strategy = STRATEGY[drafter]
    # Our engine takes a round's checkpoint at `begin`, before the drafter answers, so a
    # plain step of a drafter pays it too (llama-server saves one only when it drafted).
    begin_s = ROUND_COPIES[strategy].saves * p.checkpoint_s() if drafter != "none" else 0.0
    total = 0.0
    for r in trace.rounds:
        if not r.drafted:
            total += p.verify_s(1, r.ctx) + begin_s
            continue
        rejected = r.accepted < r.drafted
        total += p.verify_s(r.drafted + 1, r.ctx) + p.round_copy_s(strategy, rejected)
        if strategy == "per_token":
            total += p.intermediate_write_s(r.drafted + 1)
        if strategy == "checkpoint" and rejected:
            total += p.forward_s(r.accepted + 1, r.ctx)
        if drafter == "mtp":
            total += r.drafted * mtp_token_s
    return total


def predict(p: CostProfile, row: Row, mtp_token_s: float) -> float:
    """The model's seconds for one row."""
    if row.kind == "prefill":
        return prefill_s(p, row.trace)
    return decode_s(p, row.trace, row.drafter, mtp_token_s)


def fit(rows: Sequence[Row], base: CostProfile) -> tuple[CostProfile, float]:
    """The non-negative `LINEAR` unknowns that minimise the relative error of every row,
    each kind of row weighted alike. The columns are read off the model itself (it is
    linear in them), so the fit charges exactly what the sim charges."""
    counts = Counter(r.kind for r in rows)
    origin = np.zeros(len(LINEAR))
    origin[LINEAR.index("inv_hbm_bw")] = 1e-30

    def model(theta: np.ndarray) -> np.ndarray:
        prof, mtp = profile_of(base, theta)
        return np.array([predict(prof, r, mtp) for r in rows])

    at_origin = model(origin)
    step = 1e-3
    cols = []
    for i, name in enumerate(LINEAR):
        e = origin.copy()
        e[i] += step * (1e-9 if name == "inv_hbm_bw" else 1.0)
        cols.append((model(e) - at_origin) / (e[i] - origin[i]))
    a = np.column_stack(cols)
    measured = np.array([r.seconds for r in rows])
    w = np.array([1.0 / (r.seconds * math.sqrt(counts[r.kind])) for r in rows])
    scale = np.abs(a).max(axis=0) + 1e-300  # columns of very different units
    theta = nnls((a * w[:, None]) / scale, (measured - at_origin) * w)
    return profile_of(base, np.maximum(theta / scale, origin))


def fit_errors(rows: Sequence[Row], profile: CostProfile, mtp_token_s: float
               ) -> dict[str, dict[str, float]]:
    """Per kind of row: relative RMS and largest relative error, predicted vs measured."""
    rel: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        rel[r.kind].append(predict(profile, r, mtp_token_s) / r.seconds - 1)
    return {k: {"rel_rms": math.sqrt(sum(e * e for e in v) / len(v)),
                "max_rel": max(abs(e) for e in v), "points": len(v)} for k, v in rel.items()}
