"""Non-negative least squares for the cost fits (the llama calibration's and `specledger
calibrate`'s), with no solver dependency: Lawson and Hanson's active-set method, which
ends at the exact minimum after at most a few passes per column (a log's fit has a few
dozen columns: a forward's cost per batch-size span, the round's and each drafter's)."""

import numpy as np


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """argmin |a x - b| over x >= 0 (Lawson-Hanson: a column joins the free set while the
    gradient favours it, and the step back keeps every free coefficient positive)."""
    n = a.shape[1]
    x = np.zeros(n)
    free = np.zeros(n, dtype=bool)
    tol = 10 * np.finfo(float).eps * max(a.shape) * max(float(np.abs(a).sum(axis=0).max(
        initial=0.0)), 1.0)
    for _ in range(3 * n + 1):
        gradient = a.T @ (b - a @ x)
        if free.all() or not (gradient[~free] > tol).any():
            break
        free[int(np.argmax(np.where(free, -np.inf, gradient)))] = True
        while True:
            trial = np.zeros(n)
            trial[free] = np.linalg.lstsq(a[:, free], b, rcond=None)[0]
            if (trial[free] > 0).all():
                x = trial
                break
            blocked = free & (trial <= 0)
            step = float(np.min(x[blocked] / (x[blocked] - trial[blocked])))
            x = x + step * (trial - x)
            free &= x > tol
            x[~free] = 0.0
    return x
