"""The calibration's cost model and its fit: what the sim charges for each backend
operation under a `CostProfile`, and the profile's rates fitted to measured times."""

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from engine.sim.backend import UBATCH
from engine.sim.costs import CostProfile

# What the fit sets: every rate and fixed cost of `CostProfile`; the sizes are the model's.
FITTED = ("launch_s", "hbm_bw", "peak_flops", "token_s", "multi_token_s", "copy_bw",
          "state_step_s", "recurrence_launch_s")


@dataclass(frozen=True)
class Point:
    """One measured operation: `batch` tokens (or positions) at context `ctx`."""

    op: str
    batch: int
    ctx: int
    seconds: float


# --- the model of each operation: what the sim backend charges for it -----------------


def _prefill_s(p: CostProfile, n: int, ctx: int) -> float:
    return sum(p.forward_s(min(UBATCH, n - i), ctx + i) for i in range(0, n, UBATCH))


# Mirrors the charges in engine/sim/backend.py, operation by operation.
PREDICT: dict[str, Callable[[CostProfile, int, int], float]] = {
    "verify_live": lambda p, b, c: p.forward_s(b, c),
    "verify_per_token": lambda p, b, c: p.forward_s(b, c) + p.intermediate_write_s(b),
    "verify_deferred": lambda p, b, c: p.forward_s(b, c),
    "snapshot": lambda p, b, c: p.copy_s(),
    "restore": lambda p, b, c: p.copy_s(),
    "select": lambda p, b, c: p.copy_s(),
    "replay_inputs": lambda p, b, c: p.recurrence_s(b),
    "prefill": _prefill_s,
}


def predict(profile: CostProfile, op: str, batch: int, ctx: int) -> float:
    """The sim's time for one operation under `profile`."""
    return PREDICT[op](profile, batch, ctx)


# --- fitting ------------------------------------------------------------------------


def _with_rates(base: CostProfile, x: np.ndarray) -> CostProfile:
    rates = np.exp(np.clip(x, -80.0, 80.0))  # a wild trial step stays finite
    return replace(base, **dict(zip(FITTED, (float(v) for v in rates), strict=True)))


def _levenberg_marquardt(residual: Callable[[np.ndarray], np.ndarray], x0: np.ndarray,
                         iterations: int = 200) -> tuple[np.ndarray, float]:
    """Minimise |residual(x)|² from x0; return x and the cost. The Jacobian is numeric;
    steps come from least squares, so a direction the data does not constrain (a rate
    that no measured point depends on) gets no step instead of a singular system."""
    x, r = x0, residual(x0)
    cost, damping, h = float(r @ r), 1e-2, 1e-5
    for _ in range(iterations):
        jac = np.column_stack([(residual(x + h * e) - r) / h for e in np.eye(len(x))])
        scale = np.sqrt((jac * jac).sum(axis=0)) + 1e-12
        while True:
            a = np.vstack([jac, math.sqrt(damping) * np.diag(scale)])
            b = np.concatenate([-r, np.zeros(len(x))])
            step = np.linalg.lstsq(a, b, rcond=None)[0]
            r_new = residual(x + step)
            new_cost = float(r_new @ r_new)
            if new_cost < cost:
                break
            damping *= 4
            if damping > 1e12:
                return x, cost
        done = cost - new_cost < 1e-12 * max(cost, 1e-30)
        x, r, cost, damping = x + step, r_new, new_cost, max(damping / 3, 1e-9)
        if done:
            break
    return x, cost


def fit(points: Sequence[Point], base: CostProfile) -> CostProfile:
    """`base` with its rates and fixed costs (`FITTED`) fitted to `points` by least
    squares on the log of predicted over measured time, every operation weighted alike.
    The max() of the forward model makes the problem piecewise, so several starts are
    tried (compute binding early or late, weights read fast or slow)."""
    counts = Counter(p.op for p in points)
    weight = np.array([1 / math.sqrt(counts[p.op]) for p in points])
    measured = np.log([p.seconds for p in points])

    def residual(x: np.ndarray) -> np.ndarray:
        prof = _with_rates(base, x)
        pred = [predict(prof, p.op, p.batch, p.ctx) for p in points]
        return weight * (np.log(pred) - measured)

    copies = [p.seconds for p in points if p.op in ("snapshot", "restore", "select")]
    copy_bw = base.state_bytes / statistics.median(copies) if copies else base.copy_bw
    starts = [np.log([1e-3, bw, flops, 1e-4, 1e-3, copy_bw, 1e-4, 1e-4])
              for bw in (1e9, 1e11) for flops in (1e9, 1e11)]
    best, _ = min((_levenberg_marquardt(residual, x0) for x0 in starts), key=lambda f: f[1])
    return _with_rates(base, best)


def fit_errors(points: Sequence[Point], profile: CostProfile) -> dict[str, dict[str, float]]:
    """Per operation: relative RMS and largest relative error of predicted vs measured."""
    rel: dict[str, list[float]] = defaultdict(list)
    for p in points:
        rel[p.op].append(predict(profile, p.op, p.batch, p.ctx) / p.seconds - 1)
    return {op: {"rel_rms": math.sqrt(sum(e * e for e in errs) / len(errs)),
                 "max_rel": max(abs(e) for e in errs), "points": len(errs)}
            for op, errs in rel.items()}
