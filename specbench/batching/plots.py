"""The batching suite's plot: aggregate tok/s against slots, a panel per backend, a line
per variant (batched), plain decoding's sequential schedule dashed."""

from collections.abc import Sequence
from pathlib import Path

from specbench.batching.points import PLAIN, Point, Rate
from specbench.common import panels, save_figure

COLORS = {PLAIN: "black", "checkpoint": "tab:red", "per_token": "tab:blue",
          "input_replay": "tab:green"}
PANEL = (4.2, 3.4)  # inches per panel


def plot_throughput(groups: dict[str, tuple[Sequence[Point], Rate]], stem: Path
                    ) -> list[Path]:
    """One panel per group (a backend's fastest points and the throughput to read):
    tok/s against slots, log-log."""
    fig, axes = panels(len(groups), *PANEL)
    for ax, (title, (points, rate)) in zip(axes, groups.items(), strict=True):
        for (variant, schedule), style in _lines(points):
            pts = sorted((pt for pt in points
                          if pt.variant == variant and pt.schedule == schedule),
                         key=lambda pt: pt.slots)
            ax.plot([pt.slots for pt in pts], [rate(pt) for pt in pts], marker="o", ms=3,
                    color=COLORS[variant], ls=style,
                    label=f"{variant}" + (f" ({schedule})" if style != "-" else ""))
        slots = sorted({pt.slots for pt in points})
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(slots, [str(n) for n in slots])
        ax.set_xlabel("slots")
        ax.set_ylabel("aggregate tok/s")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=7)
    return save_figure(fig, stem)


def _lines(points: Sequence[Point]) -> list[tuple[tuple[str, str], str]]:
    """(variant, schedule) pairs present, batched solid, sequential dashed."""
    seen = dict.fromkeys((pt.variant, pt.schedule) for pt in points)
    return [(key, "-" if key[1] == "batched" else "--") for key in seen]
