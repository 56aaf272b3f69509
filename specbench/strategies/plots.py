"""The strategies suite's plots: time per token, speedup over `checkpoint`, rollback share
and extra memory, each strategy a line."""

import statistics
from collections.abc import Sequence
from typing import Any

from specbench.common import group_by, panels, save_figure
from specbench.strategies.points import CORRECT, STRATEGIES, Point, speedups

COLORS = {"checkpoint": "tab:red", "per_token": "tab:blue", "input_replay": "tab:green",
          "none": "tab:gray"}
PANEL = (3.4, 3.2)  # inches per plot panel


def _panels(groups: Sequence[tuple[str, Sequence[Point]]], value: Any,
            strategies: Sequence[str], ylabel: str, stem: Any, goal: float | None = None
            ) -> list[Any]:
    """A panel per (title, points) group, one line per strategy of `value(points at that
    acceptance)` against acceptance; `goal` as a dashed line."""
    fig, axes = panels(len(groups), *PANEL)
    for ax, (title, points) in zip(axes, groups, strict=True):
        by = group_by(points, lambda pt: (pt.strategy, pt.acceptance))
        for s in strategies:
            xs = sorted(a for t, a in by if t == s)
            ax.plot(xs, [value(by[s, a]) for a in xs], marker="o", ms=3, label=s,
                    color=COLORS[s])
        ax.set_xlabel("per-token acceptance")
        ax.grid(alpha=0.3)
        if goal is not None:
            ax.axhline(goal, ls="--", lw=0.8, color="black")
        ax.set_title(title, fontsize=9)
        ax.set_ylabel(ylabel)
    axes[0].legend(fontsize=7)
    return save_figure(fig, stem)


def _by_draft(points: Sequence[Point], title: str) -> list[tuple[str, list[Point]]]:
    """The points split by draft length, each group titled with it."""
    return [(f"{title}, draft {k}", [pt for pt in points if pt.draft == k])
            for k in sorted({pt.draft for pt in points})]


def plot_cost(points: Sequence[Point], title: str, stem: Any) -> list[Any]:
    """Time per committed token against acceptance, a panel per draft length."""
    return _panels(_by_draft(points, title), lambda pts: min(pt.ms_per_token for pt in pts),
                   STRATEGIES, "ms per committed token", stem)


def plot_torch_ratio(points: Sequence[Point], goal: float, stem: Any) -> list[Any]:
    """Speedup over checkpoint on the real engine, a panel per draft length, with the
    `goal` speedup as a dashed line."""
    x = speedups(points)
    return _panels(_by_draft(points, "torch CPU"),
                   lambda pts: x[(pts[0].profile, pts[0].acceptance, pts[0].draft)][
                       pts[0].strategy], STRATEGIES, "speedup over checkpoint (time/token)",
                   stem, goal)


def plot_rollback_share(groups: dict[str, Sequence[Point]], draft: int, stem: Any
                        ) -> list[Any]:
    """Rollback share of the strategy's time against acceptance, at one draft length."""
    return _panels([(f"{title}, draft {draft}", [pt for pt in points if pt.draft == draft])
                    for title, points in groups.items()],
                   lambda pts: 100 * statistics.median(pt.rollback_share for pt in pts),
                   CORRECT, "rollback share of time per token (%)", stem)


def plot_memory(memory: dict[str, dict[str, dict[int, float]]], stem: Any) -> list[Any]:
    """Extra memory per sequence against draft length, log scale (`none` holds 0)."""
    fig, axes = panels(len(memory), *PANEL)
    for ax, (where, by) in zip(axes, memory.items(), strict=True):
        for s in CORRECT:
            ks = sorted(by[s])
            ax.plot(ks, [by[s][k] for k in ks], marker="o", ms=3, label=s, color=COLORS[s])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        top = max(by["per_token"].values())
        ax.set_ylim(top=20 * top)  # headroom for the legend above the lines
        ax.set_title(where, fontsize=9)
        ax.set_xlabel("draft length")
        ax.set_ylabel("extra bytes per sequence")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=7, title="none: 0 B", title_fontsize=7, loc="upper left")
    return save_figure(fig, stem)
