"""The conversation suite's plots: history re-prefilled per turn, and the conversation
cost per turn stacked by its parts, `legacy` beside `truncate`, a panel per backend."""

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.common import group_by, panels, save_figure

if TYPE_CHECKING:  # the suite imports this module; its run type is only named here
    from specbench.conversation import ConversationRun

CLOCK = {"sim": "simulated s", "torch": "wall s"}
COLORS = {"legacy": "tab:red", "truncate": "tab:blue"}
HATCH = {"legacy": "", "truncate": "//"}
PANEL = (5.2, 3.6)  # inches per plot panel
# The three parts of the conversation cost: label, TurnMetrics attribute, colour.
COST_PARTS = (("generation", "generation_s", "tab:green"),
              ("state repair", "state_repair_s", "tab:orange"),
              ("repeated prefill", "reprefill_s", "tab:purple"))


def plot_reprefill(runs: Sequence["ConversationRun"], stem: Path) -> list[Path]:
    """History tokens re-prefilled per turn, legacy against truncate, a panel per backend."""
    groups = group_by(runs, lambda r: r.backend)
    fig, axes = panels(len(groups), *PANEL)
    width = 0.4
    for ax, (backend, group) in zip(axes, groups.items(), strict=True):
        for i, r in enumerate(group):
            ax.bar([m.turn + (i - 0.5) * width for m in r.turns],
                   [m.reprefill_tokens for m in r.turns], width, color=COLORS[r.policy],
                   label=f"eog={r.policy} ({r.total('reprefill_tokens'):.0f} in all)")
        top = max(m.reprefill_tokens for r in group for m in r.turns)
        ax.set_ylim(0, max(1.3 * top, 1))  # room for the legend; a flat zero still shows
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_xticks([m.turn for m in group[0].turns])
        ax.set_title(f"{backend}: history re-prefilled per turn", fontsize=9)
        ax.set_xlabel("turn")
        ax.set_ylabel("tokens re-prefilled")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7, loc="upper left")
    return save_figure(fig, stem)


def plot_cost(runs: Sequence["ConversationRun"], stem: Path) -> list[Path]:
    """Conversation cost per turn stacked as generation / state repair / repeated
    prefill; legacy (plain) left of truncate (hatched), a panel per backend."""
    from matplotlib.patches import Patch

    groups = group_by(runs, lambda r: r.backend)
    fig, axes = panels(len(groups), *PANEL)
    width = 0.4
    for ax, (backend, group) in zip(axes, groups.items(), strict=True):
        for i, r in enumerate(group):
            turns = [m.turn + (i - 0.5) * width for m in r.turns]
            bottom = [0.0] * len(turns)
            for label, attr, color in COST_PARTS:
                values = [getattr(m, attr) for m in r.turns]
                ax.bar(turns, values, width, bottom=bottom, color=color, hatch=HATCH[r.policy],
                       edgecolor="black", linewidth=0.3, label=label if i == 0 else None)
                bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        top = max(m.conversation_s for r in group for m in r.turns)
        ax.set_ylim(0, 1.45 * top)  # room for the legend above the bars
        totals = ", ".join(f"{r.policy} {r.total('conversation_s'):.1f}" for r in group)
        ax.set_xticks([m.turn for m in group[0].turns])
        ax.set_title(f"{backend}: conversation cost per turn ({totals} {CLOCK[backend]})",
                     fontsize=9)
        ax.set_xlabel("turn (left: legacy, right: truncate)")
        ax.set_ylabel(CLOCK[backend])
        handles = [*ax.get_legend_handles_labels()[0],
                   *(Patch(facecolor="white", edgecolor="black", hatch=HATCH[r.policy],
                           label=f"eog={r.policy}") for r in group)]
        ax.legend(handles=handles, fontsize=7, ncol=3, loc="upper left")
    return save_figure(fig, stem)
