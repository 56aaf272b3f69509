"""A cost profile fitted from one llama-server -v log's own clock (`specledger calibrate`).

The log's timed pieces (adapters/llama/calibration/clock.py) are linear in a handful of terms,
fitted by non-negative least squares (engine/sim/nnls.py) on their seconds, each row
weighted by its own seconds (a prompt's forward of 100 ms and a round's 20 µs of log lines
count as much as each other, for what they say relative to their size):

    forward  = launch_s + token_s[k..k'] x tokens between the knots (adapters/llama/
               forwardcurve.py: the batch sizes the log measured) + ctx_token_s x context
               read + rebuild_s if its batch differs from the forward before it
    round    = loop_s + round_s (a speculative round) + save_s x speculative checkpoints
               saved + restore_s x restored + line_s x the log lines it printed
    call     = draft_call_s[d] for each drafter d the call ran (a chain asks each in turn)
               + draft_token_s[d] x tokens a model drafter drafted
    pass     = drafter_round_s[d] + drafter_round_token_s[d] x the tokens of the forward
               the drafter's pass follows (the MTP head over a verify's or a prompt's
               tokens, an n-gram's update)

Every timed piece is a row of its own: where the build brackets them (0.3.36 -v) each
forward, each pass and the drafters' call, and the round's rest; each prompt forward
(`Chunk`) and its pass. So the forward's cost comes from forwards of every size the log
ran, a drafter's from its own calls and passes, and the round's from what is left; a
server without a drafter is predicted from what a forward and a round cost, not from
rounds that also drafted. Where the build does not time a piece (before 0.3.36: the
forwards, the passes) it stays in its round's row with the rest. A log that never ran
the MTP head of a model that has one gets its costs from the model's shape
(adapters/llama/gguf/shape.py), `derived`.

A term the log never exercises is absent; a term whose column the others already span,
or nearly (`SEPARABLE`: an n-gram log's `round_s` beside `save_s`, a checkpoint every
speculative round; `rebuild_s` in a log that seldom changes batch), cannot be
separated: it is fixed at 0 and the terms that carry it are named. Scheduler stalls of a
shared machine are outliers, not costs: the row furthest from the fit is dropped while it
lies beyond `OUTLIER_MADS` robust deviations (and `OUTLIER_FLOOR`), at most `MAX_DROPPED`
of them; their count and excess are reported, and what they took (with whatever else the
fit leaves of the log's decode time) is the fit's `level`, the log's decode seconds over
its fitted rounds', charged to every prediction alike: the machine stalled that much while
the log was written. Each term's spread is its standard error on the final fit. A prompt
forward is the curve at its batch, its context, and `prompt_s` (its graph built for its
shape, the checkpoint around it); it carries the curve only beyond the decode sizes.

llama.cpp reuses a forward's built and allocated graph only for a forward of the same
batch (docs/design.md#llama-forward-costs), so `rebuild_s` is charged on each forward whose
batch differs from the one before it: a plain server or a fixed draft size rebuilds almost
never (it is fitted only where at least `MIN_REBUILD_ROWS` of the decode forwards rebuilt),
a server under `--spec-draft-p-min` on most rounds, every prompt forward always. What
`n_rs_seq` adds to every forward (a copy of the conv state per kept position, per
recurrent layer) is the same on each forward of one server, so no log separates it from
`launch_s`; but every copy is nodes of the target's graph (`LogClock.graph_nodes`, 485
nodes at n_rs_seq 0 and 629 at 8 for the shipped target), and a forward's fixed cost and
its graph's building are its nodes run and allocated one by one, so a log of another graph
is charged `launch_s` and `rebuild_s` in proportion to its nodes (`PER_NODE`). Where a
prediction needs what the fit log never measured (a batch size beyond its forwards, a
drafter it never ran, another graph, checkpoints it never saved),
adapters/llama/calibration/reach.py says so.
"""

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from adapters.llama.calibration.clock import Chunk, LogClock, Segment
from adapters.llama.calibration.curve import LAUNCH, Curve, knots_of
from engine.sim.costs import CostProfile, Placement
from engine.sim.nnls import nnls

FORWARD_TERMS = ("ctx_token_s", "rebuild_s")
"""A forward's terms beside the curve's (`launch_s` and its slopes)."""
PROMPT = "prompt_s"
"""A prompt forward's own fixed cost: the graph built for its shape, the checkpoint around
it (no decode forward pays it)."""
ROUND_TERMS = ("loop_s", "save_s", "restore_s", "round_s", "line_s")
"""A round's terms beside its forwards and its drafters', in the order they claim a column
the others also span (a checkpoint saved every speculative round is named as such)."""
SEPARABLE = 0.25
"""A column must keep this share of its norm outside the span of the columns before it
to be fitted: on a noisy clock a column that nearly repeats others (a checkpoint saved on
every speculative round beside the round's own cost) trades places with them at random."""
OUTLIER_MADS = 6.0
OUTLIER_FLOOR = 0.25  # nor less than this off, relative: a tight fit's rounding is no stall
MAX_DROPPED = 0.1  # at most this share of the rows is ever dropped
ROW_FLOOR_S = 20e-6
"""Rows are weighted by their own seconds, none by less than this: a round's rest is tens
of microseconds on a clock of one, and a line printed in a stalled moment doubles it."""
MIN_REBUILD_ROWS = 0.05
"""The least share of a log's decode forwards that rebuilt the graph for `rebuild_s` to be
fitted (docs/design.md#llama-forward-costs)."""
OUT_OF_REACH = 1e18  # a rate the fitted profile never pays (bytes over it are ~0 s)
PER_NODE = (LAUNCH, "rebuild_s")
"""The terms of a forward that are its graph's nodes run or built one by one."""
KEPT_NODES = 3
"""Graph nodes each kept position adds per recurrent layer (`build_conv_state`: two views
and a `ggml_cpy`; 485, 557 and 629 nodes at n_rs_seq 0, 4 and 8 on the shipped target)."""
MTP = "draft-mtp"
DERIVED_PASS_TOP = 16
"""The derived MTP pass's per-token cost is the forward's mean slope up to this batch (a
verify's sizes), not a prompt's."""

Features = dict[str, float]
Row = tuple[float, Features]


def draft_term(drafter: str) -> str:
    """The term of a model drafter's cost per drafted token."""
    return f"draft_token_s[{drafter}]"


def call_term(drafter: str) -> str:
    """The term of a drafter's fixed cost per call (an n-gram's lookup, a model's setup)."""
    return f"draft_call_s[{drafter}]"


def pass_term(drafter: str) -> str:
    """The term of a drafter's pass after each forward (the MTP head over its output)."""
    return f"drafter_round_s[{drafter}]"


def pass_token_term(drafter: str) -> str:
    """The term of a drafter's pass per token of the forward it follows."""
    return f"drafter_round_token_s[{drafter}]"


def _add(parts: Iterable[Features]) -> Features:
    out: Features = {}
    for part in parts:
        for name, value in part.items():
            out[name] = out.get(name, 0.0) + value
    return out


def forward_features(curve: Curve, batch: int, ctx: int, rebuilt: bool) -> Features:
    """A forward of `batch` tokens after `ctx` cached as columns."""
    return curve.features(batch) | {"ctx_token_s": float(ctx + batch),
                                     "rebuild_s": float(rebuilt)}


def round_features(s: Segment) -> Features:
    """What a round pays beside its forwards and its drafters."""
    return {"loop_s": 1.0, "round_s": float(s.speculative), "save_s": float(s.saves),
            "restore_s": float(s.restores), "line_s": float(s.lines)}


def call_features(s: Segment) -> Features:
    """The drafters' call of a round: each drafter it ran, the model drafter's tokens."""
    out = {call_term(d): 1.0 for d in s.called}
    if s.drafter is not None:
        out[call_term(s.drafter)] = 1.0
        out[draft_term(s.drafter)] = float(s.drafted)
    return out


def pass_features(drafter: str, batch: int) -> Features:
    """A drafter's pass over a forward of `batch` tokens."""
    return {pass_term(drafter): 1.0, pass_token_term(drafter): float(batch)}


def segment_rows(s: Segment, curve: Curve) -> list[Row]:
    """The rows a segment gives the fit, as (seconds, columns): each piece the build timed
    (a forward, a pass, the drafters' call) a row of its own, the rest of the round the
    last (with the pieces not timed)."""
    rows: list[Row] = []
    rest, untimed = s.seconds, [round_features(s)]
    forwards = [forward_features(curve, b, c, r)
                for (b, c), r in zip(s.forwards, s.rebuilt or (False,) * len(s.forwards),
                                     strict=True)]
    if s.forward_s is not None and len(s.forward_s) == len(forwards):
        rows += zip(s.forward_s, forwards, strict=True)
        rest -= sum(s.forward_s)
    else:
        untimed += forwards
    if s.pass_s and s.pass_drafter is not None:
        drafter = s.pass_drafter
        rows += [(p, pass_features(drafter, s.forwards[min(i, len(s.forwards) - 1)][0]))
                 for i, p in enumerate(s.pass_s)]
        rest -= sum(s.pass_s)
    calls = call_features(s)
    if s.draft_s is not None and calls:
        rows.append((s.draft_s, calls))
        rest -= s.draft_s
    else:
        untimed.append(calls)
    return [*rows, (max(rest, 0.0), _add(untimed))]


def chunk_rows(c: Chunk, curve: Curve) -> list[Row]:
    """A prompt forward's row and its pass's: the forward's cost at its batch, and the
    prompt path's own (`prompt_s`: a graph built for its shape, the checkpoint around
    it), which no decode forward pays."""
    features = forward_features(curve, c.tokens, c.ctx, False) | {PROMPT: 1.0}
    rows = [(c.seconds, features)]
    if c.pass_s and c.pass_drafter is not None:
        rows.append((c.pass_s, pass_features(c.pass_drafter, c.tokens)))
    return rows


def features(s: Segment, curve: Curve) -> Features:
    """A segment's column values, by term: everything its rows charge."""
    return _add(f for _, f in segment_rows(s, curve))


@dataclass(frozen=True)
class Term:
    """A fitted term: its value and standard error (seconds; None where the rows leave
    no degree of freedom to estimate it), and how it was settled:
    `fitted`, `absent` (never exercised by the log), `unseparated` (fixed at 0; `carried_by`
    the terms whose columns span it), `bound` (fitted at the bound 0) or `derived`
    (a drafter the log never ran, its cost from what the log says of the model; `source`)."""

    name: str
    value: float
    spread: float | None
    status: str
    carried_by: tuple[str, ...] = ()
    source: str = ""


@dataclass(frozen=True)
class Residuals:
    """Relative residuals of the rows kept: RMS, median absolute, largest; rows kept and
    dropped as outliers, and the seconds the dropped rows took beyond the fit (`stall_s`:
    what the fit does not charge)."""

    rms: float
    median_abs: float
    max_abs: float
    rows: int
    dropped: int
    stall_s: float


@dataclass
class LogFit:
    """The terms of a log, the residuals of its rows, the knots of its forward curve, and
    the nodes of the target's graph its forwards ran (None: not printed)."""

    terms: dict[str, Term] = field(default_factory=dict)
    residuals: Residuals | None = None
    curve: Curve = field(default_factory=lambda: Curve(()))
    graph_nodes: int | None = None
    level: float = 1.0

    def value(self, name: str) -> float:
        """A term's value (0 where the log did not give it)."""
        t = self.terms.get(name)
        return 0.0 if t is None else t.value


def _separable(names: Sequence[str], a: np.ndarray, kept_anyway: frozenset[str] = frozenset()
               ) -> tuple[list[int], dict[int, tuple[str, ...]]]:
    """Columns taken in order, each kept only if it leaves the span of those kept (or is
    `kept_anyway`); the others map to the kept columns that span them."""
    kept: list[int] = []
    spanned: dict[int, tuple[str, ...]] = {}
    for j in range(a.shape[1]):
        col = a[:, j]
        if not kept or names[j] in kept_anyway:
            kept.append(j)
            continue
        basis = a[:, kept]
        coef = np.linalg.lstsq(basis, col, rcond=None)[0]
        rest = col - basis @ coef
        if np.linalg.norm(rest) > SEPARABLE * np.linalg.norm(col):
            kept.append(j)
        else:
            share = np.abs(coef) * np.linalg.norm(basis, axis=0)
            spanned[j] = tuple(names[kept[i]] for i in range(len(kept))
                               if share[i] > 1e-6 * np.linalg.norm(col))
    return kept, spanned


def _residuals(rel: np.ndarray, dropped: int, stall_s: float) -> Residuals:
    return Residuals(rms=float(np.sqrt(np.mean(rel**2))), median_abs=float(np.median(np.abs(rel))),
                     max_abs=float(np.max(np.abs(rel))), rows=len(rel), dropped=dropped,
                     stall_s=stall_s)


def fit_columns(names: Sequence[str], a: np.ndarray, y: np.ndarray,
                fixed: Mapping[str, Term] | None = None,
                kept_anyway: frozenset[str] = frozenset()) -> tuple[dict[str, Term], Residuals]:
    """Non-negative terms of `a x = y` in least squares, each row weighted by its own
    seconds (`ROW_FLOOR_S` at least): the `fixed` terms charged as given, absent and
    unseparated columns settled first (but `kept_anyway`: a curve's slopes, each between
    knots with forwards enough, their columns nested in one another by construction),
    stalls dropped (worst first), each term's standard error. The residuals are reported
    relative to each row."""
    fixed = fixed or {}
    terms: dict[str, Term] = dict(fixed)
    w = 1.0 / np.maximum(y, ROW_FLOOR_S)
    pinned = [j for j, n in enumerate(names) if n in fixed]
    offset = a[:, pinned] @ np.array([fixed[names[j]].value for j in pinned])
    present = [j for j in range(a.shape[1]) if np.any(a[:, j]) and j not in pinned]
    terms |= {names[j]: Term(names[j], 0.0, 0.0, "absent") for j in range(a.shape[1])
              if j not in present and j not in pinned}
    kept_local, spanned = _separable([names[j] for j in present], a[:, present], kept_anyway)
    terms |= {names[present[jl]]: Term(names[present[jl]], 0.0, 0.0, "unseparated", by)
              for jl, by in spanned.items()}
    cols = [present[j] for j in kept_local]
    keep = np.ones(len(y), dtype=bool)
    while True:
        aw = a[keep][:, cols] * w[keep, None]
        scale = np.maximum(np.abs(aw).max(axis=0), 1e-300)
        x = nnls(aw / scale, ((y - offset) * w)[keep]) / scale
        pred = offset + a[:, cols] @ x
        off = np.where(keep, np.abs(y - pred) / np.maximum(pred, ROW_FLOOR_S), 0.0)
        worst = int(np.argmax(off))
        bound = max(OUTLIER_MADS * 1.4826 * float(np.median(off[keep])), OUTLIER_FLOOR)
        if off[worst] <= bound or (~keep).sum() >= MAX_DROPPED * len(y):
            break
        keep[worst] = False  # the worst row first: a stall bends the fit toward itself
    dropped = int((~keep).sum())
    rel = (pred - y) / np.maximum(y, ROW_FLOOR_S)
    active = [i for i in range(len(cols)) if x[i] > 0]
    aw = a[keep][:, [cols[i] for i in active]] * w[keep, None]
    err = (pred[keep] - y[keep]) * w[keep]
    dof = int(keep.sum()) - len(active)
    cov = float(err @ err) / max(dof, 1) * np.linalg.pinv(aw.T @ aw)
    for i, j in enumerate(cols):
        spread: float | None = 0.0
        if i in active:
            var = cov[active.index(i)][active.index(i)]
            spread = math.sqrt(max(0.0, float(var))) if dof > 0 else None
        terms[names[j]] = Term(names[j], float(x[i]), spread, "fitted" if i in active else "bound")
    stall_s = float(np.sum((y - pred)[~keep]))
    return {n: terms[n] for n in names}, _residuals(rel[keep], dropped, stall_s)


def _drafter_terms(rows: Sequence[Row]) -> list[str]:
    """The drafters' columns the rows use, by drafter then kind."""
    used = {n for _, f in rows for n in f}
    makers = (call_term, draft_term, pass_term, pass_token_term)
    drafters = sorted({n[n.index("[") + 1:-1] for n in used if "[" in n and not n.startswith(
        "token_s")})
    return [m(d) for d in drafters for m in makers if m(d) in used]


def fit_log(clock: LogClock) -> LogFit:
    """The terms of every timed piece of the log: its rounds' forwards, calls, passes and
    rests, and its prompts' forwards."""
    segs = clock.segments
    if any(s.seconds <= 0 for s in segs):
        raise ValueError("calibrate: a segment of zero length (timestamps out of order)")
    decoded = [b for s in segs for b, _ in s.forwards]
    # the decode forwards give the curve over their sizes; a prompt's carry it beyond
    curve = knots_of(decoded + [c.tokens for c in clock.chunks if c.tokens > max(decoded)])
    rows = ([r for s in segs for r in segment_rows(s, curve)]
            + [r for c in clock.chunks for r in chunk_rows(c, curve)])
    names = [LAUNCH, *curve.terms, *FORWARD_TERMS, PROMPT, *ROUND_TERMS,
             *_drafter_terms(rows)]
    a = np.array([[f.get(n, 0.0) for n in names] for _, f in rows])
    y = np.array([sec for sec, _ in rows])
    rebuilt = [r for s in segs for r in s.rebuilt]
    terms, residuals = fit_columns(names, a, y, _rare_rebuilds(rebuilt),
                                   frozenset(curve.terms))
    decode = sum(len(segment_rows(s, curve)) for s in segs)
    fitted = a[:decode] @ np.array([terms[n].value for n in names])
    fit = LogFit(terms=terms, residuals=residuals, curve=curve, graph_nodes=clock.graph_nodes,
                 level=float(y[:decode].sum() / fitted.sum()))
    fit.terms |= _derived_mtp(clock, fit)
    return fit


def _rare_rebuilds(rebuilt: Sequence[bool]) -> dict[str, Term]:
    """`rebuild_s` fixed at 0 (its cost left in `launch_s` and the prompt forwards') where
    fewer than `MIN_REBUILD_ROWS` of the decode forwards rebuilt a graph: a fixed draft size
    changes the batch only in a task's first and last rounds, whose few rows would fit it
    to their own noise."""
    if sum(rebuilt) < MIN_REBUILD_ROWS * len(rebuilt):
        return {"rebuild_s": Term("rebuild_s", 0.0, 0.0, "unseparated", (LAUNCH,))}
    return {}


def forward_s(fit: LogFit, batch: int, ctx: int = 0) -> float:
    """The seconds `fit` charges a forward of `batch` tokens that reuses its graph."""
    return sum(fit.value(n) * v for n, v in forward_features(fit.curve, batch, ctx,
                                                             False).items())


def _derived_mtp(clock: LogClock, fit: LogFit) -> dict[str, Term]:
    """An MTP head the log never ran, from the model's shape: per drafted token its share
    of a batch-1 forward; its pass after a forward, its share of that forward (the fixed
    part at one token, the rest at the forward's mean slope over a verify's sizes)."""
    if clock.shape is None or MTP in clock.drafters:  # ran: measured, or in its rounds
        return {}
    share, source = clock.shape.mtp_share(), clock.shape.describe()
    one = forward_s(fit, 1)
    top = max((k for k in fit.curve.knots if k <= DERIVED_PASS_TOP), default=1)
    slope = (forward_s(fit, top) - one) / (top - 1) if top > 1 else 0.0
    values = {draft_term(MTP): share * one, pass_term(MTP): share * one,
              pass_token_term(MTP): share * slope}
    return {n: Term(n, v, None, "derived", source=source) for n, v in values.items()}


def _scale(fit: LogFit, graph_nodes: int | None) -> float:
    """The per-node scale of a graph of `graph_nodes` against the fit log's (1: either
    not printed)."""
    return graph_nodes / fit.graph_nodes if graph_nodes and fit.graph_nodes else 1.0


def predict_segment(fit: LogFit, s: Segment, graph_nodes: int | None = None) -> float:
    """The seconds `fit` charges for a segment (a drafter it never saw costs 0) of a
    server whose target graph has `graph_nodes` nodes (None: the fit log's)."""
    scale = _scale(fit, graph_nodes)
    return fit.level * sum(fit.value(n) * v * (scale if n in PER_NODE else 1.0)
                           for n, v in features(s, fit.curve).items())


def measured_tok_s(clock: LogClock) -> float:
    """Decode tokens/s of a log as print_timing measured it: every task's eval tokens
    over its eval seconds, summed."""
    return sum(t.eval_tokens for t in clock.tasks) / sum(t.eval_s for t in clock.tasks)


def predict_tok_s(fit: LogFit, clock: LogClock) -> tuple[float, float]:
    """Decode tokens/s of a log as print_timing measured it and as `fit` predicts it
    from the log's rounds and graph (the same eval tokens over the fit's seconds)."""
    tokens = sum(t.eval_tokens for t in clock.tasks)
    predicted = sum(predict_segment(fit, s, clock.graph_nodes) for s in clock.segments)
    return measured_tok_s(clock), tokens / predicted


def _median_lines(segs: Sequence[Segment], speculative: bool) -> float | None:
    lines = [s.lines for s in segs if s.speculative is speculative]
    return statistics.median(lines) if lines else None


def to_profile(fit: LogFit, name: str, description: str, clock: LogClock) -> CostProfile:
    """The sim's profile of a fit of `clock`: a forward costs what the fit charges one of
    its batch at each knot (`forward_knots`, `forward_costs`: the curve through the sizes
    the log measured) plus `ctx_token_s` per cached token (as bytes per token over a
    bandwidth out of reach, so that the sim's state writes, which it measures in bytes
    over the same bandwidth, cost nothing the log did not show); `launch_s` is a plain
    round's own cost (`loop_s` and its log lines, the fit log's median plain round's),
    since the sim charges a plain round one forward; a speculative round's own cost
    beyond it (`round_s` and the lines it adds) is the round sync; a checkpoint (of the
    log's state size) in host memory costs `save_s`; each cost times the fit's `level`
    (the log's stalls). The forward's fixed cost is at the log's `n_rs_seq`, each kept
    position's share of it (`KEPT_NODES` per recurrent layer, over the graph's nodes)
    `rs_seq_s`, so that a forecast of a server keeping another number moves it. The sim
    charges a restore as a save plus a replay forward, where the fit has `restore_s` (in
    the report); it keeps no forward's batch history, so `rebuild_s` (in the report) is
    not charged, nor the drafters' calls and passes (drafting is not a backend cost)."""
    level = fit.level
    ctx = fit.value("ctx_token_s") * level
    segs = clock.segments
    plain_lines = _median_lines(segs, False)
    spec_lines = _median_lines(segs, True)
    lines = plain_lines if plain_lines is not None else (spec_lines or 0.0)
    extra_lines = (spec_lines - plain_lines if spec_lines is not None and plain_lines is not None
                   else 0.0)
    line = fit.value("line_s")
    rs_seq_s = (fit.value(LAUNCH) * KEPT_NODES * clock.recurrent_layers / clock.graph_nodes
                if clock.graph_nodes and clock.recurrent_layers else 0.0)
    knots = fit.curve.knots
    return CostProfile(
        name=name, weight_bytes=0.0, hbm_bw=OUT_OF_REACH, flops_per_token=0.0,
        peak_flops=OUT_OF_REACH, kv_bytes_per_token=ctx * OUT_OF_REACH,
        state_bytes=float(clock.state_bytes or 0), copy_bw=OUT_OF_REACH,
        launch_s=level * (fit.value("loop_s") + line * lines), description=description,
        checkpoint_place=Placement.HOST.value,
        host_bw=OUT_OF_REACH, host_copy_s=level * fit.value("save_s"),
        round_sync_s=level * (fit.value("round_s") + line * max(extra_lines, 0.0)),
        rs_seq_s=level * rs_seq_s, launch_rs_seq=clock.n_rs_seq or 0, forward_knots=knots,
        forward_costs=tuple(level * forward_s(fit, k) for k in knots))
