"""Non-negative least squares, exact, for the handful of unknowns a cost fit has (the
llama calibration's and `specledger calibrate`'s), with no solver dependency."""

import itertools

import numpy as np


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """argmin |a x - b| over x >= 0, exactly: the least-squares solution on every subset
    of the columns, the best whose coefficients are all non-negative (a handful of
    unknowns: 2^7 small solves, no solver dependency)."""
    n = a.shape[1]
    best, best_cost = np.zeros(n), float(b @ b)
    for k in range(1, n + 1):
        for cols in itertools.combinations(range(n), k):
            x = np.linalg.lstsq(a[:, cols], b, rcond=None)[0]
            if (x < 0).any():
                continue
            r = a[:, cols] @ x - b
            if (cost := float(r @ r)) < best_cost:
                best, best_cost = np.zeros(n), cost
                best[list(cols)] = x
    return best
