"""A cost profile fitted from one llama-server -v log's own clock (`specledger calibrate`).

The log's segments (adapters/llama/logclock.py: one per round, its wall time and what
ran in it) are linear in a handful of terms, fitted by non-negative least squares on
their seconds (engine/sim/nnls.py; unweighted, so the fitted segments add up to the
measured decode time, which is what tokens/s divides):

    segment = launch_s + token_s x tokens forwarded + ctx_token_s x context read
              + round_s (a speculative round) + save_s x speculative checkpoints saved
              + restore_s x restored + rebuild_s x forwards that rebuilt their graph
    drafting = draft_token_s[drafter] x tokens a model drafter drafted
               + draft_call_s[drafter] (its call's fixed cost)
    passing = drafter_round_s[drafter] x the drafter's passes after a forward
              (+ drafter_round_token_s[drafter] x those forwards' tokens: derived only)

Where the log times the drafter's pass after each forward (`Segment.pass_s`, 0.3.36 -v)
it is a row of its own too, so `launch_s` stays the bare forward's fixed cost and a
server without a drafter is predicted without it. A log that never ran the MTP head of
a model that has one gets its costs from the model's shape (adapters/llama/modelshape.py),
`derived`: per drafted token that share of the fitted batch-1 forward, per pass that share
of the forward it follows.

Where the log times a model drafter's call on its own (`Segment.draft_s`), a round is
two rows: its drafting (the drafter's terms only) and the rest (the others), so the
drafter's cost is measured and taken out of the forward's; elsewhere (older builds) the
round is one row of both. A plain round whose model drafter was asked and drafted nothing
(draft-mtp under `--spec-draft-p-min`: adapters/llama/logclock.py times the call) is
charged the call alone (`draft_call_s`), so a log of such rounds beside drafts of several
sizes, the recipe `calibrate --help` gives, separates `round_s` from `launch_s` and
`token_s` from both. print_timing's prompt lines give `prefill_token_s` and
`prefill_s`. A term the log never exercises is absent; a term whose column the others
already span, or nearly (`SEPARABLE`: an n-gram log's `round_s` beside `save_s`, a
checkpoint every speculative round; a draft-mtp log's verify batch, always the draft
size plus one, beside `launch_s`), cannot be separated: it is fixed at 0 and the terms
that carry it are named. Where the rounds cannot separate `token_s` (a draft-mtp log:
its verify batch is always the draft size plus one), the prompt lines' `prefill_token_s`
is taken for it and the rest refitted with it fixed (`pinned`, its source said): the
same forward's cost per token, measured where the batch varies. Scheduler stalls of a
shared machine are outliers, not costs: the segment furthest from the fit is dropped
while it lies beyond `OUTLIER_MADS` robust deviations (and `OUTLIER_FLOOR`), at most
`MAX_DROPPED` of them; their count and excess are reported. Each term's spread is its
standard error on the final fit.

llama.cpp reuses a forward's built and allocated graph only for a forward of the same
batch (docs/design.md#llama-forward-costs), so `rebuild_s` is charged on each forward whose
batch differs from the one before it (adapters/llama/logclock.py counts them: on the
recorded logs the count matches the `graphs reused` print_timing reports): a plain server
or a fixed draft size rebuilds almost never, a server under `--spec-draft-p-min` on most
rounds. It is fitted only where at least `MIN_REBUILD_ROWS` of the rows rebuilt; elsewhere
it stays in `launch_s`. What `n_rs_seq` adds to every forward (a copy of the conv state per
kept position, per recurrent layer) is the same on each forward of one server, so no log
separates it from `launch_s`; but the log prints it: every copy is nodes of the target's
graph (`LogClock.graph_nodes`, 485 nodes at n_rs_seq 0 and 629 at 8 for the shipped
target). A forward's fixed cost is its graph's nodes run one by one, so a log of another
graph is charged `launch_s` and `restore_s` (the replay forward's) in proportion to its
nodes (`PER_NODE`; docs/design.md#llama-forward-costs).

Some costs never come apart in a llama log, so the terms are drawn to hold them whole:
every round runs one verify forward more than it restores (a restore always brings one
replay), so `launch_s` is a round's fixed cost (its forward's and the server loop's) and
`restore_s` holds the replay forward's fixed cost; a verify of several tokens runs the
chunked recurrence and, with `n_rs_seq`, writes a state per position, which always come
with a speculative round or its drafted tokens, so `round_s` and the drafter's term carry
them (the sim's `multi_token_s` stays 0).
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from adapters.llama.logclock import LogClock, Prompt, Segment
from engine.sim.costs import CostProfile, Placement
from engine.sim.nnls import nnls

BASE_TERMS = ("launch_s", "token_s", "save_s", "restore_s", "round_s", "ctx_token_s",
              "rebuild_s")
"""The segment terms, in the order they claim a column the others also span."""
SEPARABLE = 0.25
"""A column must keep this share of its norm outside the span of the columns before it
to be fitted: on a noisy clock a column that nearly repeats others (the context read
of rounds whose contexts differ by a few tens of percent, beside the round's fixed
cost; a verify batch that is always the same size) trades places with them at random."""
OUTLIER_MADS = 6.0
OUTLIER_FLOOR = 0.25  # nor less than this off, relative: a tight fit's rounding is no stall
MAX_DROPPED = 0.1  # at most this share of the rows is ever dropped
MIN_REBUILD_ROWS = 0.05
"""The least share of a log's rows whose forwards rebuilt the graph for `rebuild_s` to be
fitted (docs/design.md#llama-forward-costs)."""
OUT_OF_REACH = 1e18  # a rate the fitted profile never pays (bytes over it are ~0 s)
PER_NODE = ("launch_s", "restore_s")
"""The terms that are a forward's fixed cost, charged per node of its graph."""
KEPT_NODES = 3
"""Graph nodes each kept position adds per recurrent layer (`build_conv_state`: two views
and a `ggml_cpy`; 485, 557 and 629 nodes at n_rs_seq 0, 4 and 8 on the shipped target)."""


def draft_term(drafter: str) -> str:
    """The term of a model drafter's cost per drafted token."""
    return f"draft_token_s[{drafter}]"


def call_term(drafter: str) -> str:
    """The term of a model drafter's fixed cost per call."""
    return f"draft_call_s[{drafter}]"


def pass_term(drafter: str) -> str:
    """The term of a drafter's pass after each forward (the MTP head over its output)."""
    return f"drafter_round_s[{drafter}]"


def pass_token_term(drafter: str) -> str:
    """The term of a drafter's pass per token of the forward it follows (only ever
    derived: a log that times the passes fits them whole, per pass)."""
    return f"drafter_round_token_s[{drafter}]"


MTP = "draft-mtp"


def _pass_features(s: Segment) -> dict[str, float]:
    if s.pass_drafter is None or not s.pass_s:
        return {}
    tokens = sum(b for b, _ in s.forwards[:len(s.pass_s)])
    return {pass_term(s.pass_drafter): float(len(s.pass_s)),
            pass_token_term(s.pass_drafter): float(tokens)}


def _forward_features(s: Segment) -> dict[str, float]:
    return {"launch_s": 1.0, "token_s": float(sum(b for b, _ in s.forwards)),
            "rebuild_s": float(s.rebuilds),
            "ctx_token_s": float(sum(c + b for b, c in s.forwards)),
            "save_s": float(s.saves), "restore_s": float(s.restores),
            "round_s": float(s.speculative)}


def _draft_features(s: Segment) -> dict[str, float]:
    if s.drafter is None:
        return {}
    return {draft_term(s.drafter): float(s.drafted), call_term(s.drafter): 1.0}


def features(s: Segment) -> dict[str, float]:
    """A segment's column values, by term (its drafting and the rest together)."""
    return _forward_features(s) | _draft_features(s) | _pass_features(s)


def fit_rows(s: Segment) -> list[tuple[float, dict[str, float]]]:
    """The rows a segment gives the fit, as (seconds, column values): its drafting and
    the rest apart where the log timed the drafter's call, else the whole round; each
    of the drafter's passes after a forward a row of its own (one pass each, so the
    fixed costs still span every row and the fitted rows add up to the log's time)."""
    rows: list[tuple[float, dict[str, float]]] = []
    rest, rest_features = s.seconds, _forward_features(s)
    if s.pass_s and s.pass_drafter is not None:
        rows += [(p, {pass_term(s.pass_drafter): 1.0}) for p in s.pass_s]
        rest -= sum(s.pass_s)
    if s.draft_s is None or s.drafter is None:
        return [*rows, (rest, rest_features | _draft_features(s))]
    return [*rows, (s.draft_s, _draft_features(s)), (rest - s.draft_s, rest_features)]


@dataclass(frozen=True)
class Term:
    """A fitted term: its value and standard error (seconds; None where the rows leave
    no degree of freedom to estimate it), and how it was settled:
    `fitted`, `absent` (never exercised by the log), `unseparated` (fixed at 0; `carried_by`
    the terms whose columns span it), `bound` (fitted at the bound 0), `pinned` (fixed at
    a value another part of the same log gives; `source` says which, and why) or `derived`
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
    """The terms of a log, the residuals of its decode segments and prompts, and the nodes
    of the target's graph its forwards ran (None: not printed)."""

    terms: dict[str, Term] = field(default_factory=dict)
    decode: Residuals | None = None
    prefill: Residuals | None = None
    graph_nodes: int | None = None

    def value(self, name: str) -> float:
        """A term's value (0 where the log did not give it)."""
        t = self.terms.get(name)
        return 0.0 if t is None else t.value


def _separable(names: Sequence[str], a: np.ndarray) -> tuple[list[int], dict[int, tuple[str, ...]]]:
    """Columns taken in order, each kept only if it leaves the span of those kept; the
    others map to the kept columns that span them."""
    kept: list[int] = []
    spanned: dict[int, tuple[str, ...]] = {}
    for j in range(a.shape[1]):
        col = a[:, j]
        if not kept:
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
                fixed: Mapping[str, Term] | None = None) -> tuple[dict[str, Term], Residuals]:
    """Non-negative terms of `a x = y` in least squares: the `fixed` terms charged as
    given, absent and unseparated columns settled first, stalls dropped (worst first),
    each term's standard error. The residuals are reported relative to each row."""
    fixed = fixed or {}
    terms: dict[str, Term] = dict(fixed)
    pinned = [j for j, n in enumerate(names) if n in fixed]
    offset = a[:, pinned] @ np.array([fixed[names[j]].value for j in pinned])
    present = [j for j in range(a.shape[1]) if np.any(a[:, j]) and j not in pinned]
    terms |= {names[j]: Term(names[j], 0.0, 0.0, "absent") for j in range(a.shape[1])
              if j not in present and j not in pinned}
    kept_local, spanned = _separable([names[j] for j in present], a[:, present])
    terms |= {names[present[jl]]: Term(names[present[jl]], 0.0, 0.0, "unseparated", by)
              for jl, by in spanned.items()}
    cols = [present[j] for j in kept_local]
    keep = np.ones(len(y), dtype=bool)
    while True:
        aw = a[keep][:, cols]
        scale = np.abs(aw).max(axis=0)
        x = nnls(aw / scale, (y - offset)[keep]) / scale
        pred = offset + a[:, cols] @ x
        off = np.where(keep, np.abs(y - pred) / np.maximum(pred, 1e-12), 0.0)
        worst = int(np.argmax(off))
        bound = max(OUTLIER_MADS * 1.4826 * float(np.median(off[keep])), OUTLIER_FLOOR)
        if off[worst] <= bound or (~keep).sum() >= MAX_DROPPED * len(y):
            break
        keep[worst] = False  # the worst row first: a stall bends the fit toward itself
    dropped = int((~keep).sum())
    rel = pred / y - 1
    active = [i for i in range(len(cols)) if x[i] > 0]
    aw = a[keep][:, [cols[i] for i in active]]
    resid = rel[keep]
    err = pred[keep] - y[keep]
    dof = int(keep.sum()) - len(active)
    cov = float(err @ err) / max(dof, 1) * np.linalg.pinv(aw.T @ aw)
    for i, j in enumerate(cols):
        spread: float | None = 0.0
        if i in active:
            var = cov[active.index(i)][active.index(i)]
            spread = math.sqrt(max(0.0, float(var))) if dof > 0 else None
        terms[names[j]] = Term(names[j], float(x[i]), spread, "fitted" if i in active else "bound")
    stall_s = float(np.sum((y - pred)[~keep]))
    return {n: terms[n] for n in names}, _residuals(resid, dropped, stall_s)


PINNED_TOKEN = "from the prompt lines (prefill_token_s), the rounds could not separate it"


def fit_log(clock: LogClock) -> LogFit:
    """The decode terms from the log's segments (each drafter's call apart where the log
    times it), the prefill terms from its prompts; `token_s` from the prompts where the
    rounds cannot separate it."""
    segs = clock.segments
    drafters = sorted({s.drafter for s in segs if s.drafter})
    passers = sorted({s.pass_drafter for s in segs if s.pass_drafter and s.pass_s})
    names = (list(BASE_TERMS) + [t for d in drafters for t in (draft_term(d), call_term(d))]
             + [pass_term(d) for d in passers])
    rows = [r for s in segs for r in fit_rows(s)]
    a = np.array([[r.get(n, 0.0) for n in names] for _, r in rows])
    y = np.array([sec for sec, _ in rows])
    if (y <= 0).any():
        raise ValueError("calibrate: a segment of zero length (timestamps out of order)")
    p_terms, prefill = fit_prompts(clock.prompts) if clock.prompts else ({}, None)
    fixed = _rare_rebuilds(a[:, names.index("rebuild_s")])
    terms, decode = fit_columns(names, a, y, fixed)
    per_token = p_terms.get("prefill_token_s")
    if terms["token_s"].status == "unseparated" and per_token is not None and (
            per_token.status == "fitted"):
        pin = Term("token_s", per_token.value, per_token.spread, "pinned", source=PINNED_TOKEN)
        terms, decode = fit_columns(names, a, y, fixed | {"token_s": pin})
    return LogFit(terms=terms | _derived_mtp(clock, terms, drafters, passers) | p_terms,
                  decode=decode, prefill=prefill, graph_nodes=clock.graph_nodes)


def _rare_rebuilds(column: np.ndarray) -> dict[str, Term]:
    """`rebuild_s` fixed at 0 (its cost left in `launch_s`) where fewer than
    `MIN_REBUILD_ROWS` of the rows rebuilt a graph: a fixed draft size changes the batch
    only in a task's last rounds, whose few rows would fit it to their own noise."""
    if 0 < np.count_nonzero(column) < MIN_REBUILD_ROWS * len(column):
        return {"rebuild_s": Term("rebuild_s", 0.0, 0.0, "unseparated", ("launch_s",))}
    return {}


def _derived_mtp(clock: LogClock, terms: Mapping[str, Term], drafters: Sequence[str],
                 passers: Sequence[str]) -> dict[str, Term]:
    """An MTP head the log never ran, from the model's shape: per drafted token its share
    of a batch-1 forward; its pass after a forward, its share of that forward."""
    if clock.shape is None:
        return {}
    share, source = clock.shape.mtp_share(), clock.shape.describe()
    launch, token = terms["launch_s"].value, terms["token_s"].value
    values = {} if MTP in drafters else {draft_term(MTP): share * (launch + token)}
    if MTP not in passers:
        values |= {pass_term(MTP): share * launch, pass_token_term(MTP): share * token}
    return {n: Term(n, v, None, "derived", source=source) for n, v in values.items()}


def fit_prompts(prompts: Sequence[Prompt]) -> tuple[dict[str, Term], Residuals]:
    """print_timing's prompt lines: seconds per processed token and a fixed cost, of the
    target's forwards alone (a drafter's passes over the prompt taken out where timed)."""
    a = np.array([[float(p.tokens), 1.0] for p in prompts])
    y = np.array([p.seconds - p.pass_s for p in prompts])
    return fit_columns(("prefill_token_s", "prefill_s"), a, y)


def predict_segment(fit: LogFit, s: Segment, graph_nodes: int | None = None) -> float:
    """The seconds `fit` charges for a segment (a drafter it never saw costs 0) of a
    server whose target graph has `graph_nodes` nodes (None: the fit log's)."""
    scale = graph_nodes / fit.graph_nodes if graph_nodes and fit.graph_nodes else 1.0
    return sum(fit.value(n) * v * (scale if n in PER_NODE else 1.0)
               for n, v in features(s).items())


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


def to_profile(fit: LogFit, name: str, description: str, clock: LogClock) -> CostProfile:
    """The sim's profile of a fit of `clock`: a forward is `launch_s` plus `token_s` per
    token and `ctx_token_s` per cached token (as one byte per token over an effective
    bandwidth); a checkpoint (of the log's state size) in host memory costs `save_s`; the
    speculative round's `round_s` is the round sync; `launch_s` is at the log's `n_rs_seq`,
    each kept position's share of it (`KEPT_NODES` per recurrent layer, over the graph's
    nodes) `rs_seq_s`, so that a forecast of a server keeping another number moves it. The
    sim charges a restore as a save plus a replay forward's `launch_s`, where the fit has
    `restore_s` (in the report); it keeps no forward's batch history, so `rebuild_s` (in
    the report) is not charged. Bandwidth terms the log cannot see are out of reach;
    drafting is not a backend cost (the report has it)."""
    ctx = fit.value("ctx_token_s")
    launch = fit.value("launch_s")
    rs_seq_s = (launch * KEPT_NODES * clock.recurrent_layers / clock.graph_nodes
                if clock.graph_nodes and clock.recurrent_layers else 0.0)
    return CostProfile(
        name=name, weight_bytes=0.0, hbm_bw=1.0 / ctx if ctx > 0 else OUT_OF_REACH,
        flops_per_token=0.0, peak_flops=OUT_OF_REACH, kv_bytes_per_token=1.0,
        state_bytes=float(clock.state_bytes or 0), copy_bw=OUT_OF_REACH,
        launch_s=launch, description=description,
        token_s=fit.value("token_s"), checkpoint_place=Placement.HOST.value,
        host_bw=OUT_OF_REACH, host_copy_s=fit.value("save_s"),
        round_sync_s=fit.value("round_s"), rs_seq_s=rs_seq_s,
        launch_rs_seq=clock.n_rs_seq or 0)
