"""Why a held-out prediction of `specledger calibrate`'s check misses the band, read off
the fit and the two logs (specbench/calibration/llama/logs.py writes it under its table):
a drafter the fit log never ran (its drafting charged 0, or derived from the model's
shape; its pass after each forward likewise), speculative checkpoints the fit log never
saved or restored (charged 0), plain rounds charged a speculative round's fixed cost, a
drafting server's plain rounds predicting a server without a drafter, a server whose log
lines cost another time than the fit log's, a forward that costs another time than the
fit log's at the same batch, both reusing their graph (0.3.36's compute brackets time each
forward; a forward of another batch than the one before it rebuilds its graph, which the
fit charges apart, `rebuild_s`: docs/design.md#llama-forward-costs), a fit log whose
target kept another number of per-position recurrent states (`n_rs_seq`: a copy per kept
position on every forward, which no one log separates; charged per node of the graph
where both logs print it, adapters/llama/calibration/fit.py), or the setting's own runs spreading
beyond the band.

A log line's cost is read off two lines the server loop prints one after the other with
no work between (tools/server/server-queue.cpp, start_loop: `waiting for new tasks`, then
`processing new tasks` while a task is queued): on this machine, shared with another
job, a drafting server's -v log at times takes ~13 µs a line where a plain server's
stays at ~0, and a round prints ~20 lines.
"""

import gzip
import statistics
from dataclasses import dataclass
from pathlib import Path

from adapters.llama.calibration.clock import LogClock
from adapters.llama.calibration.fit import MTP
from adapters.llama.log.run import line_time


@dataclass(frozen=True)
class Miss:
    """A setting a fit predicts outside the band: the fit, the setting, the error and
    the reasons the logs give (none found: `unexplained`)."""

    fit: str
    setting: str
    error: float
    reasons: tuple[str, ...]


FORWARD_DIFFERS = 0.1  # a relative difference of forwards worth naming


def forward_times(clock: LogClock) -> dict[int, list[float]]:
    """A log's rounds of one forward (a verify, or a plain step) that reused the graph of
    the forward before them, by batch size, as their compute brackets time them (empty:
    the build logs no brackets)."""
    out: dict[int, list[float]] = {}
    for s in clock.segments:
        if s.forward_s and len(s.forward_s) == len(s.forwards) == 1 and not s.rebuilds:
            out.setdefault(s.forwards[0][0], []).append(s.forward_s[0])
    return out


def forward_at(fit_clock: LogClock, clock: LogClock) -> tuple[int, float, float] | None:
    """At the batch size both logs forward most often (the larger of the two logs' smaller
    counts): the batch, the log's and the fit log's median forward seconds (None: no batch
    in common)."""
    fit, own = forward_times(fit_clock), forward_times(clock)
    common = [b for b in own if b in fit]
    if not common:
        return None
    b = max(common, key=lambda k: min(len(own[k]), len(fit[k])))
    return b, statistics.median(own[b]), statistics.median(fit[b])


_IDLE = ("start_loop: waiting for new tasks", "start_loop: processing new tasks")
LINE_GAP_DIFFERS = 5e-6  # seconds a line: beyond the log clock's microsecond resolution


def line_gap_s(path: Path) -> float | None:
    """The median seconds between the server loop's two back-to-back lines of a log file
    (plain or gzip; None: the log has no such pair with timestamps)."""
    gaps, before = [], None
    gz = path.read_bytes()[:2] == b"\x1f\x8b"
    with (gzip.open(path, "rt", errors="replace") if gz else path.open(errors="replace")) as f:
        for text in f:
            t = line_time(text)
            if before is not None and t is not None and _IDLE[1] in text:
                gaps.append(t - before)
            before = t if t is not None and _IDLE[0] in text else None
    return statistics.median(gaps) if gaps else None


def miss_reasons(fit_clock: LogClock, clock: LogClock, noise: float, band: float,
                 gaps: tuple[float | None, float | None] = (None, None)) -> tuple[str, ...]:
    """What the logs say about a prediction of `clock` from the fit of `fit_clock` that
    misses: each a short clause; `noise` is the setting's runs' spread, `gaps` the fit
    log's and this log's seconds a line (`line_gap_s`)."""
    out = []
    unseen = sorted({s.drafter for s in clock.segments if s.drafter}
                    - {s.drafter for s in fit_clock.segments if s.drafter})
    out += [f"{d}'s drafting is not in the fit log ("
            + ("derived from the model's shape)" if d == MTP and fit_clock.shape else
               "charged 0)") for d in unseen]
    fit_passes = {s.pass_drafter for s in fit_clock.segments if s.pass_s}
    out += [f"{d}'s pass after each forward is not in the fit log ("
            + ("derived from the model's shape)" if d == MTP and fit_clock.shape else
               "charged 0)") for d in sorted({s.pass_drafter for s in clock.segments if s.pass_s
                             and s.pass_drafter} - fit_passes)]
    ckpt = (sum(s.saves for s in clock.segments), sum(s.restores for s in clock.segments))
    if any(ckpt) and not any(s.saves or s.restores for s in fit_clock.segments):
        out.append(f"its rounds save {ckpt[0]} and restore {ckpt[1]} speculative "
                   "checkpoints, which the fit log never did (charged 0)")
    plain = any(not s.speculative for s in clock.segments)
    fit_plain = any(not s.speculative for s in fit_clock.segments)
    if plain and not fit_plain:
        out.append("the fit log's rounds are all speculative, so a speculative round's "
                   "fixed cost (round_s: " + ("" if fit_passes else "the drafter's pass "
                   "after each verify, ") + "the verify's per-position states and the "
                   "hidden states the drafter reads) stays in launch_s and each plain round "
                   "is charged it")
    if fit_plain and not any(s.speculative for s in clock.segments):
        out.append("the fit log's plain rounds ran beside a drafter (its call and its "
                   "pass are timed apart, not what they leave the forward between them: a "
                   "lookup's update, the MTP head's context), which a server without one "
                   "does not pay")
    at = forward_at(fit_clock, clock)
    if at is not None and abs(at[2] / at[1] - 1) > FORWARD_DIFFERS:
        out.append(f"its forward of {at[0]} token(s) took {1e3 * at[1]:.2f} ms where the fit "
                   f"log's took {1e3 * at[2]:.2f} ms (medians of their compute brackets)")
    fit_rs, own_rs = fit_clock.n_rs_seq, clock.n_rs_seq
    if fit_rs is not None and own_rs is not None and fit_rs != own_rs:
        kept = (f"the fit log's target kept n_rs_seq = {fit_rs} per-position states, "
                f"this one {own_rs}: every forward copies a conv state per kept position "
                "and recurrent layer (llama.cpp build_conv_state), ")
        nodes = fit_clock.graph_nodes, clock.graph_nodes
        out.append(kept + (f"charged as launch_s per node of the graph ({nodes[1]} nodes "
                           f"where the fit log's had {nodes[0]}), each copy a mean node"
                           if all(nodes) else
                           "a cost one log's launch_s holds at its own n_rs_seq"))
    fit_gap, gap = gaps
    if fit_gap is not None and gap is not None and abs(fit_gap - gap) > LINE_GAP_DIFFERS:
        out.append(f"its server logs a line in {1e6 * gap:.0f} µs where the fit log's took "
                   f"{1e6 * fit_gap:.0f} µs (two lines of the server loop with nothing "
                   "between), on each of the ~20 lines of every round")
    if noise > band:
        out.append(f"its own runs spread {100 * noise:.0f}%, beyond the band")
    return tuple(out)


def misses_text(misses: list[Miss]) -> str:
    """The misses as markdown lines, one per fit and setting."""
    return "\n".join(f"- {m.setting} from the {m.fit} log ({100 * m.error:+.1f}%): "
                     + ("; ".join(m.reasons) if m.reasons else "unexplained by the logs")
                     for m in misses)
