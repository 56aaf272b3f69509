"""Acceptance over an interval run, per draft position: drafts never (or almost never)
accepted, acceptance collapsing from the run's first half to its second, and deep draft
positions that hardly ever accept (each costs a drafted token per verify for a small
fraction of one). A log that prints no drafted counts (SGLang: only each window's accept
length and rate) is judged on the engine's own rates, the same thresholds."""

from typing import Any

from eventlog.postmortem.advice import ADVICE, CAUSE_ADVICE, Cause
from eventlog.postmortem.finding import Finding, Kind, Severity
from eventlog.postmortem.intervals import WindowDetector, line_of, pct
from fsm.payloads import Interval

NEAR_ZERO = 0.05
"""Accepted / drafted below which drafting is called collapsed: a k-token draft then adds
less than 0.05 k tokens per verify, while every drafted token costs a draft step and a
verified position."""
HALF_DROP = 0.5
"""The second half of a run collapsed when its acceptance is below this share of the
first half's (windows of at least `MIN_WINDOWS`)."""
MIN_WINDOWS = 4
WASTED = 0.10
"""A draft position accepted less often than this adds under 0.1 tokens per verify."""


def _sums(rows: list[tuple[int, Interval]]) -> tuple[int, int]:
    acc = sum(p["accepted"] or 0 for _, p in rows)
    drafted = sum(p["drafted"] or 0 for _, p in rows)
    return acc, drafted


def _positions(rows: list[tuple[int, Interval]]) -> list[float]:
    """Each position's acceptance over the windows, weighted by their drafted tokens."""
    weighted: list[float] = []
    total = 0.0
    for _, p in rows:
        pos, w = p["acc_per_pos"], float(p["drafted"] or 1)
        if not pos:
            continue
        weighted += [0.0] * (len(pos) - len(weighted))
        for i, x in enumerate(pos):
            weighted[i] += x * w
        total += w
    return [x / total for x in weighted] if total else []


def _mean_rate(rows: list[tuple[int, Interval]]) -> float:
    """The mean of the windows' own acceptance rates (each window counts once: the log
    gives no drafted counts to weigh them by)."""
    rates = [p["draft_acceptance"] for _, p in rows if p["draft_acceptance"] is not None]
    return sum(rates) / len(rates) if rates else 0.0


def _rate_collapse(rows: list[tuple[int, Interval]], fix: str) -> list[Finding]:
    """A collapse judged on the windows' own rates, where the log prints no counts."""
    rows = [(s, p) for s, p in rows if p["draft_acceptance"] is not None]
    if not rows:
        return []
    first, last, mean = rows[0][0], rows[-1][0], _mean_rate(rows)
    lens = f"{rows[0][1]['mean_accept_len']} -> {rows[-1][1]['mean_accept_len']}"
    numbers: dict[str, Any] = {"windows": len(rows), "mean_rate": round(mean, 4),
                               "first_line": rows[0][1]["line"]}
    if mean < NEAR_ZERO:
        return [Finding(
            Kind.ACCEPTANCE_COLLAPSE, Severity.WARNING, first, last,
            f"Drafting collapsed: the engine's acceptance rate averaged {pct(mean)} over "
            f"{len(rows)} window(s) from {line_of(rows[0][1])} (mean acceptance length "
            f"{lens}).", fix, numbers)]
    half = len(rows) // 2
    r1, r2 = _mean_rate(rows[:half]), _mean_rate(rows[half:])
    if len(rows) >= MIN_WINDOWS and r1 > 0 and r2 < HALF_DROP * r1:
        return [Finding(
            Kind.ACCEPTANCE_COLLAPSE, Severity.WARNING, rows[half][0], last,
            f"Acceptance collapsed over the run: the engine's acceptance rate averaged "
            f"{pct(r1)} in its first {half} window(s), {pct(r2)} in the last "
            f"{len(rows) - half} (from {line_of(rows[half][1])}; mean acceptance length "
            f"{lens}).", fix, numbers | {"first_half": r1, "second_half": r2})]
    return []


class IntervalAcceptance(WindowDetector):
    """Folds the windows that drafted; reports a collapse, then wasted deep positions."""

    def finish(self) -> list[Finding]:
        """A collapse (drafts near never accepted, or the second half's acceptance under half
        the first's), else deep positions that hardly accept."""
        rows = self.windows.speculative
        if not rows:
            return []
        acc, drafted = _sums(rows)
        pos = _positions(rows)
        first, last = rows[0][0], rows[-1][0]
        numbers: dict[str, Any] = {"windows": len(rows), "accepted": acc, "drafted": drafted,
                                   "acc_per_pos": [round(x, 3) for x in pos],
                                   "first_line": rows[0][1]["line"]}
        fix = CAUSE_ADVICE[Cause.WINDOWED_ACCEPTANCE]
        if not drafted and not pos:
            return _rate_collapse(rows, fix)
        if drafted and acc / drafted < NEAR_ZERO:
            dead = [i + 1 for i, x in enumerate(pos) if x == 0.0]
            where = (f"; positions {dead[0]}-{dead[-1]} never accepted in any window"
                     if len(dead) > 1 else "")
            return [Finding(
                Kind.ACCEPTANCE_COLLAPSE, Severity.WARNING, first, last,
                f"Drafting collapsed: {acc:,} of {drafted:,} drafted tokens accepted "
                f"({pct(acc / drafted)}) over {len(rows)} window(s) from "
                f"{line_of(rows[0][1])}{where}; the engine's own mean acceptance length "
                f"is {rows[-1][1]['mean_accept_len']} at {line_of(rows[-1][1])}.", fix,
                numbers)]
        if len(rows) >= MIN_WINDOWS:
            half = len(rows) // 2
            a1, d1 = _sums(rows[:half])
            a2, d2 = _sums(rows[half:])
            if d1 and d2 and a1 / d1 > 0 and (a2 / d2) < HALF_DROP * (a1 / d1):
                p1, p2 = _positions(rows[:half]), _positions(rows[half:])
                drops = ", ".join(f"{i + 1}: {pct(x)} -> {pct(y)}"
                                  for i, (x, y) in enumerate(zip(p1, p2, strict=False)))
                return [Finding(
                    Kind.ACCEPTANCE_COLLAPSE, Severity.WARNING, rows[half][0], last,
                    f"Acceptance collapsed over the run: {pct(a1 / d1)} of drafted tokens in "
                    f"its first {half} window(s), {pct(a2 / d2)} in the last "
                    f"{len(rows) - half} (from {line_of(rows[half][1])}); per position "
                    f"{drops}.", fix, numbers | {"first_half": a1 / d1,
                                                 "second_half": a2 / d2})]
        wasted = [i for i, x in enumerate(pos) if i > 0 and x < WASTED]
        if wasted and len(pos) > 1:
            rates = ", ".join(f"{i + 1}: {pct(pos[i])}" for i in wasted)
            return [Finding(
                Kind.DRAFT_POSITIONS_WASTED, Severity.INFO, first, last,
                f"Draft positions {wasted[0] + 1}-{len(pos)} of {len(pos)} are accepted "
                f"under {pct(WASTED)} of the time over {len(rows)} window(s) ({rates}): "
                f"each adds under 0.1 tokens per verify for a drafted token.",
                ADVICE[Kind.DRAFT_POSITIONS_WASTED], numbers)]
        return []
