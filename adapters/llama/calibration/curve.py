"""A target forward's cost as a function of the tokens it carries, piecewise linear
between the batch sizes a log measured.

On the shipped model a one-token forward runs the recurrence one step, a forward of two
or more its chunked form, and a prompt's hundreds of tokens share each weight read: the
cost per token falls by half or more from a verify of a few tokens to a prompt
(docs/results.md#one-logs-profile-specledger-calibrate), so no one straight line through
the forwards of one size says what a forward of another costs. A log measures the
forwards it ran: its decode rounds (a plain step, each verify, each replay) and its
prompts' forwards (adapters/llama/calibration/clock.py `Chunk`: a conversation's later turns
carry forwards of every size between). The curve goes through those sizes:

    forward(b) = launch_s + sum_j token_s[k_j-1..k_j] x clamp(b - k_j-1, 0, k_j - k_j-1)

with knots k_0 < k_1 < ... chosen among the measured sizes, `launch_s` the cost at the
smallest, each slope non-negative (a forward never costs less for carrying more). Above
the largest knot the last slope goes on; below the smallest a forward is charged in
proportion to its tokens. Both are extrapolations, which adapters/llama/calibration/reach.py names.
"""

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

KNOT_FORWARDS = 8
"""The least forwards between a knot and the one before it (the upper one counted): a
size seen once is a row of the fit, but one time is no point to bend the curve at."""
KNOT_RATIO = 1.1
"""Consecutive knots are at least this ratio apart, so that each slope spans forwards of
sizes apart enough to be told from its neighbours'."""
WIDE_GAP = 2.0
"""A size at least this ratio above the last knot is a knot with `WIDE_FORWARDS` forwards
since it: a prompt's forwards are few, and each is the curve's only word over its span."""
WIDE_FORWARDS = 2
LAUNCH = "launch_s"


def slope_term(lo: int, hi: int) -> str:
    """The term of the forward's cost per token between `lo` and `hi` tokens."""
    return f"token_s[{lo}..{hi}]"


@dataclass(frozen=True)
class Curve:
    """The knots of a fitted forward curve (batch sizes, ascending; empty: no forward
    measured, the curve is `launch_s` alone)."""

    knots: tuple[int, ...]

    @property
    def terms(self) -> tuple[str, ...]:
        """The slope terms, in knot order."""
        return tuple(slope_term(a, b) for a, b in pairwise(self.knots))

    def features(self, batch: int) -> dict[str, float]:
        """A forward of `batch` tokens as the curve's columns: `launch_s` and each slope's
        tokens."""
        if not self.knots:
            return {LAUNCH: 1.0}
        first = self.knots[0]
        if batch < first:
            return {LAUNCH: batch / first}
        out = {LAUNCH: 1.0}
        last = len(self.knots) - 2
        for j, (a, b) in enumerate(pairwise(self.knots)):
            top = batch if j == last else min(batch, b)
            if top > a:
                out[slope_term(a, b)] = float(top - a)
        return out


def knots_of(sizes: Iterable[int]) -> Curve:
    """The knots for forwards of `sizes` (one entry per forward): the smallest size, then
    each size `KNOT_RATIO` above the last knot with `KNOT_FORWARDS` forwards since it (or
    `WIDE_GAP` above it with `WIDE_FORWARDS`), and the largest (in the last knot's place
    where it is less than `KNOT_RATIO` above it)."""
    counts = Counter(sizes)
    if not counts:
        return Curve(())
    ordered = sorted(counts)
    kept, since = [ordered[0]], 0
    for size in ordered[1:]:
        since += counts[size]
        wide = size >= WIDE_GAP * kept[-1] and since >= WIDE_FORWARDS
        if size >= KNOT_RATIO * kept[-1] and (since >= KNOT_FORWARDS or wide):
            kept.append(size)
            since = 0
    largest = ordered[-1]
    if kept[-1] != largest:  # the largest closes the curve, in the last knot's place if near
        near = len(kept) > 1 and largest < KNOT_RATIO * kept[-1]
        kept = [*kept[:-1], largest] if near else [*kept, largest]
    return Curve(tuple(kept))
