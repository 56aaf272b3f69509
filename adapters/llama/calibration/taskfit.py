"""A llama-server log without -v fitted request by request: what a published log holds.

A server at its default verbosity logs no round, but each request's print_timing (its
prompt's tokens and milliseconds, its decode's tokens and milliseconds), its drafts
(`draft acceptance`: drafted and accepted tokens) and its drafter's cumulative statistics
(speculative rounds, and from 0.3.24 on the milliseconds its draft calls took), and where
the request ended (`stop processing: n_tokens`). From those, per request that ran alone
(`TaskTiming`): S speculative rounds of G/S drafts each (a verify of G/S + 1 tokens), P =
T - S - A plain rounds (T decoded tokens, A accepted drafts: a speculative round yields
its accepted drafts and one token), the drafting time D, the context it decoded at. Its
decode less its drafting is its forwards:

    eval - D = S x forward(G/S + 1) + P x forward(1) + ctx_token_s x rounds x context

and its prompt is forwards of `UBATCH` tokens and one of the rest. The forward's cost is
the curve of adapters/llama/calibration/curve.py through the sizes the log measured (its
verify's, and the prompts' hundreds), fitted by logfit's weighted non-negative least
squares; drafting is charged per drafted token at the log's own rate (its D over its G).
A prediction of another log's requests from their own counts says where it needs what
the fit log never measured (adapters/llama/calibration/reach.py's clauses).
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from adapters.llama.calibration.curve import LAUNCH, Curve, knots_of
from adapters.llama.calibration.fit import Term, fit_columns
from adapters.llama.calibration.reach import Beyond, Reach, Why, drafter_outside, sizes_outside
from adapters.llama.ledger.fold import fold_tasks
from adapters.llama.ledger.tasks import LlamaTask
from adapters.llama.log.records import TimingPhase
from adapters.llama.log.run import LogReading

UBATCH = 512
"""llama.cpp's default `-ub`: a prompt is computed in forwards of this many tokens."""
CTX = "ctx_token_s"


class TaskFitError(ValueError):
    """The log has no request to fit: none timed alone with its drafts counted."""


@dataclass(frozen=True)
class TaskTiming:
    """One request that ran alone: its decoded tokens and seconds, speculative rounds,
    drafted and accepted tokens, drafting seconds (None: not logged), the mean context it
    decoded at (None: its end not logged), its prompt's processed tokens and seconds."""

    task: int
    tokens: int
    eval_s: float
    speculative: int
    drafted: int
    accepted: int
    drafting_s: float | None
    ctx: float | None
    prompt_tokens: int
    prompt_s: float

    @property
    def plain(self) -> int:
        """Rounds that verified no draft."""
        return max(self.tokens - self.speculative - self.accepted, 0)

    @property
    def verify(self) -> int:
        """The verify batch of its speculative rounds (its mean draft and one)."""
        return round(self.drafted / self.speculative) + 1 if self.speculative else 1


def _span(t: LlamaTask) -> tuple[float, float] | None:
    """When a timed task ran: from its prompt's start to its print_timing."""
    ev, pr = t.timings.get(TimingPhase.EVAL), t.timings.get(TimingPhase.PROMPT)
    if ev is None or pr is None or ev.t is None:
        return None
    return ev.t - (ev.ms + pr.ms) / 1e3, ev.t


def task_timings(reading: LogReading) -> list[TaskTiming]:
    """The requests of a log that ran alone, with their drafts counted; each drafter's
    statistics are cumulative per slot, so a request's own are the difference from the
    slot's request before it."""
    tasks = [t for t in fold_tasks(reading.records).tasks if _span(t) is not None]
    spans = [s for t in tasks if (s := _span(t)) is not None]
    shared = {i for i, a in enumerate(spans) for j, b in enumerate(spans)
              if i != j and a[0] < b[1] and b[0] < a[1]}
    before: dict[int, tuple[int, float | None]] = {}
    out = []
    for i, t in enumerate(tasks):
        ev, pr = t.timings[TimingPhase.EVAL], t.timings[TimingPhase.PROMPT]
        stats = list(t.spec_stats.values())
        rounds = sum(s.gen_drafts for s in stats)
        ms = None if any(s.draft_ms is None for s in stats) else sum(
            s.draft_ms or 0.0 for s in stats)
        last_rounds, last_ms = before.get(t.slot, (0, 0.0))
        before[t.slot] = (rounds, ms)
        if i in shared or (stats and t.totals is None):
            continue
        drafting = None if ms is None or last_ms is None else (ms - last_ms) / 1e3
        end = t.released.n_tokens if t.released is not None else None
        out.append(TaskTiming(
            task=t.task, tokens=ev.tokens, eval_s=ev.ms / 1e3,
            speculative=rounds - last_rounds if stats else 0,
            drafted=t.totals.generated if t.totals else 0,
            accepted=t.totals.accepted if t.totals else 0,
            drafting_s=drafting if stats else 0.0,
            ctx=None if end is None else end - ev.tokens / 2,
            prompt_tokens=pr.tokens, prompt_s=pr.ms / 1e3))
    return out


def _chunks(tokens: int) -> list[int]:
    """A prompt's forwards: `UBATCH` tokens each, and the rest."""
    return [UBATCH] * (tokens // UBATCH) + ([tokens % UBATCH] if tokens % UBATCH else [])


def _times(curve: Curve, size: int, n: float) -> dict[str, float]:
    return {k: n * v for k, v in curve.features(size).items()}


def decode_features(curve: Curve, t: TaskTiming) -> dict[str, float]:
    """A request's decode forwards as columns: its verifies, its plain rounds, the
    context each read."""
    out = _times(curve, t.verify, t.speculative)
    for k, v in _times(curve, 1, t.plain).items():
        out[k] = out.get(k, 0.0) + v
    out[CTX] = (t.speculative + t.plain) * (t.ctx or 0.0)
    return out


def prompt_features(curve: Curve, t: TaskTiming) -> dict[str, float]:
    """A request's prompt forwards as columns."""
    out: dict[str, float] = {}
    for size in _chunks(t.prompt_tokens):
        for k, v in curve.features(size).items():
            out[k] = out.get(k, 0.0) + v
    return out


@dataclass(frozen=True)
class TaskFit:
    """The terms of a request-level fit, the knots of its forward curve, its drafting
    seconds per drafted token (None: not logged), and what it measured: the forward sizes,
    the drafters, the draft size of its speculative rounds, the contexts its requests
    decoded at (the least and the most; None: not logged)."""

    terms: dict[str, Term]
    curve: Curve
    draft_token_s: float | None
    smallest: int
    largest: int
    drafters: tuple[str, ...]
    draft: int
    contexts: tuple[float, float] | None = None

    def value(self, name: str) -> float:
        """A term's value (0 where the log did not give it)."""
        t = self.terms.get(name)
        return 0.0 if t is None else t.value


def fit_tasks(timings: Sequence[TaskTiming], drafters: Sequence[str]) -> TaskFit:
    """The forward curve and the context's cost from every request's decode (its drafting
    taken out) and prompt, of a server whose drafters are `drafters`."""
    if not timings or any(t.drafting_s is None for t in timings):
        raise TaskFitError("the log has no request timed alone with its drafting logged")
    sizes = ([t.verify for t in timings for _ in range(t.speculative)]
             + [1 for t in timings for _ in range(t.plain)]
             + [s for t in timings for s in _chunks(t.prompt_tokens)])
    curve = knots_of(sizes)
    rows = ([(t.eval_s - (t.drafting_s or 0.0), decode_features(curve, t)) for t in timings]
            + [(t.prompt_s, prompt_features(curve, t)) for t in timings])
    names = [LAUNCH, *curve.terms, CTX]
    a = np.array([[f.get(n, 0.0) for n in names] for _, f in rows])
    y = np.array([s for s, _ in rows])
    terms, _ = fit_columns(names, a, y, kept_anyway=frozenset(curve.terms))
    drafted = sum(t.drafted for t in timings)
    rate = sum(t.drafting_s or 0.0 for t in timings) / drafted if drafted else None
    draft = max((t.verify - 1 for t in timings if t.speculative), default=0)
    ctx = [t.ctx for t in timings if t.ctx is not None]
    return TaskFit(terms=terms, curve=curve, draft_token_s=rate, smallest=min(sizes),
                   largest=max(sizes), drafters=tuple(drafters), draft=draft,
                   contexts=(min(ctx), max(ctx)) if ctx else None)


def predict_task_s(fit: TaskFit, t: TaskTiming) -> float:
    """The seconds `fit` charges a request's decode: its forwards and its drafting."""
    forwards = sum(fit.value(n) * v for n, v in decode_features(fit.curve, t).items())
    return forwards + t.drafted * (fit.draft_token_s or 0.0)


def task_outside(fit: TaskFit, timings: Sequence[TaskTiming], drafters: Sequence[str]
                 ) -> tuple[Why, ...]:
    """Why a prediction of requests `timings` of a server with `drafters` needs what the
    fit log never measured (empty: inside its reach)."""
    reach = Reach(smallest=fit.smallest, largest=fit.largest, drafters=fit.drafters,
                  saves=False, restores=False, plain=True, speculative=True,
                  graph_nodes=None, n_rs_seq=None, build=None)
    sizes = [t.verify for t in timings for _ in range(t.speculative)] + [
        1 for t in timings for _ in range(t.plain)]
    out = [(Beyond.SIZES, sizes_outside(reach, sizes)),
           *((Beyond.DRAFTER, drafter_outside(reach, d)) for d in drafters)]
    ctx = [t.ctx for t in timings if t.ctx is not None]
    if fit.contexts is not None and ctx and not (
            fit.contexts[0] <= min(ctx) and max(ctx) <= fit.contexts[1]):
        out.append((Beyond.CONTEXT, f"its requests decode at {min(ctx):.0f}-{max(ctx):.0f} "
                    f"tokens of context, beyond the {fit.contexts[0]:.0f}-"
                    f"{fit.contexts[1]:.0f} the fit log's did (the context's cost extended)"))
    drafts = sorted({t.verify - 1 for t in timings if t.speculative} - {fit.draft})
    if drafts and "draft-mtp" in drafters:
        out.append((Beyond.GRAPH, f"its MTP drafts run {', '.join(map(str, drafts))} "
                    f"token(s), the fit log's {fit.draft}: it keeps as many per-position "
                    "states (n_rs_seq) a forward, which a log without -v does not print "
                    "(charged nothing)"))
    return tuple(Why(kind, clause) for kind, clause in out if clause is not None)
