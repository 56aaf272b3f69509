"""A llama-server -v log's own clock, cut into the pieces a cost model charges.

Each round of a task (adapters/llama/taskfold) is timed by the log's line prefixes
(`M.ss.mmm.uuu`): a round's segment runs from the end of the round before it (the
first token, for the first round) to its own last line, so it holds everything the
server did for that round: the drafter's call, the speculative checkpoint saved, the
verify forward, a restore and its replay, the accept decision and the token lines.
Inside it, the drafters' call is timed on its own: where the build logs the server
loop's compute brackets (0.3.36 -v: `yielding to queue` .. `done yielding to queue`), by
the bracket right after `max possible draft`, whatever the drafter (an n-gram lookup
too, and a model drafter asked that drafted nothing: draft-mtp under
`--spec-draft-p-min`, its first token below the bar); elsewhere a model drafter's call
where the build logs both ends (0.3.21 on: `max possible draft` as the slot calls its
drafter, `called impl` as the drafter returns). That is `draft_s`, and `called` names the
drafters it ran (a chain asks each in turn until one drafts), so the drafters' cost is
measured, not inferred. Where the build brackets them, a drafter's own pass over each
forward's output (a bracket that follows the forward's with nothing between: the MTP
head over the verified tokens, an n-gram's update) is timed too: `pass_s`, the per-round
cost of serving with a drafter, which a server without one does not pay; and each of the
target's forwards: `forward_s`. The segments of a task add up to its decode time;
print_timing's `eval time` says how the server measured the same span.

The prompt phase is cut the same way: each `cached n_tokens = N, memory_seq_rm` line starts
a forward of the prompt's tokens from N to the next such line's (or the prompt's end), a
`Chunk`: timed by its compute brackets where the build logs them (the drafter's pass over
it apart), else from its line to the next one or to the first token. A log whose turns keep
their history (a conversation's) holds chunks of many sizes: the forward's cost as a
function of the tokens it carries, which the decode rounds alone show only at their own
batch sizes.

What a segment records are counts only (forwards by batch and context, drafted tokens
by drafter, saves, restores, log lines), so fitting them is the fitter's business
(adapters/llama/calibration/fit.py). Tasks whose slots ran at the same time share the
clock and cannot be cut by it: they are left out and counted.
"""

from bisect import bisect_left
from dataclasses import dataclass, field

from adapters.llama.errors import LlamaError
from adapters.llama.gguf.shape import ModelShape, model_shape
from adapters.llama.ledger.fold import fold_tasks
from adapters.llama.ledger.tasks import LlamaRound, LlamaTask
from adapters.llama.log.reader import LogReading
from adapters.llama.log.records import Compute, Count, RecordKind, TimingPhase

MODEL_DRAFTER_PREFIX = "draft"
"""llama.cpp's drafters that run a model per drafted token (draft-mtp, draft-simple,
the draft model of older builds) are named so; the n-gram lookups are not."""


class LogClockError(LlamaError):
    """The log cannot be timed: no timestamps, no verbose rounds, or no finished request."""


@dataclass(frozen=True)
class Segment:
    """One round's wall time and what ran in it: forwards as `(batch, context)` pairs (the
    verify first, then each replay), tokens drafted by a model drafter (`drafter` names
    it; None for a plain step or an n-gram lookup; a plain step whose model drafter was
    called and drafted nothing names it, `drafted` 0), speculative checkpoints saved and
    restored, and whether drafts were verified; `draft_s` the seconds of the segment
    the drafters' call took (None: not logged); `called` the drafters that call ran, in
    the chain's order (empty: no call, or not known); `pass_s` the seconds of each pass
    the server's drafter (`pass_drafter`) made after a forward (None: the build logs no
    compute brackets, or the server has no drafter); `forward_s` the seconds of each of
    the target's forwards in it, as their compute brackets time them (None: the build logs
    none); `rebuilt` for each forward whether its batch differed from the target's forward
    before it (the task's prompt, before its first round): llama.cpp reuses a built graph
    only for a forward of the previous one's shape (docs/design.md#llama-forward-costs),
    so these forwards built and allocated theirs; `lines` the log lines the segment spans
    (a -v server writes each one, on the clock like the rest)."""

    task: int
    seconds: float
    forwards: tuple[tuple[int, int], ...]
    drafter: str | None
    drafted: int
    saves: int
    restores: int
    speculative: bool
    draft_s: float | None = None
    pass_s: tuple[float, ...] | None = None
    pass_drafter: str | None = None
    forward_s: tuple[float, ...] | None = None
    rebuilt: tuple[bool, ...] = ()
    lines: int = 0
    called: tuple[str, ...] = ()

    @property
    def rebuilds(self) -> int:
        """How many of its forwards rebuilt their graph."""
        return sum(self.rebuilt)


@dataclass(frozen=True)
class Passes:
    """A log's drafter passes (chained compute brackets) as sorted (start, end) times, and
    the server's drafter that runs them (None: no drafter, or no brackets logged); its
    drafter calls and the target's forwards, the other brackets, likewise."""

    spans: tuple[tuple[float, float], ...]
    drafter: str | None
    calls: tuple[tuple[float, float], ...] = ()
    forwards: tuple[tuple[float, float], ...] = ()


def _within(spans: tuple[tuple[float, float], ...], start: float, end: float
            ) -> tuple[float, ...]:
    """The seconds of each of `spans` (a `Passes` field: passes, drafter calls, the
    target's forwards) that began in `[start, end)`."""
    lo = bisect_left(spans, (start, -1.0))
    hi = bisect_left(spans, (end, -1.0))
    return tuple(b - a for a, b in spans[lo:hi])


_IN_CALL = frozenset({RecordKind.CANDIDATE, RecordKind.DRAFTER_CALLED, RecordKind.DRAFTER_RESET})
"""Lines a drafter's call prints inside its bracket (common/speculative.cpp)."""


def _calls(reading: LogReading) -> tuple[tuple[float, float], ...]:
    """The brackets that run the drafters' call: the first after `max possible draft`
    (get_n_draft_max, then yield_to_queue(common_speculative_draft)) with only the
    drafter's own lines between."""
    calls, last = [], None
    for r in reading.records:
        if isinstance(r, Compute):
            if (not r.chained and last is RecordKind.DRAFT_BEGIN and r.t is not None
                    and r.t_begin is not None):
                calls.append((r.t_begin, r.t))
            last = r.kind
        elif r.kind not in _IN_CALL:
            last = r.kind
    return tuple(sorted(calls))


def _passes(reading: LogReading) -> Passes:
    brackets = [(r.t_begin, r.t, r.chained) for r in reading.records if isinstance(r, Compute)
                and r.t is not None and r.t_begin is not None]
    drafters = reading.server.model_drafters or reading.server.implementations
    calls = _calls(reading)
    spans = tuple(sorted((a, b) for a, b, chained in brackets if chained))
    forwards = tuple(sorted({(a, b) for a, b, chained in brackets if not chained} - set(calls)))
    return Passes(spans, drafters[0].replace("_", "-") if drafters and brackets else None,
                  calls, forwards)


@dataclass(frozen=True)
class Chunk:
    """One forward of a task's prompt: `tokens` new ones after `ctx` cached, and its
    seconds (its compute brackets where the build logs them, else from its `cached
    n_tokens` line to the next one or to the first token); `pass_s` the seconds of the
    drafter's pass over it (`pass_drafter`'s chained bracket; None: not timed apart)."""

    task: int
    tokens: int
    ctx: int
    seconds: float
    pass_s: float | None = None
    pass_drafter: str | None = None


@dataclass(frozen=True)
class TaskClock:
    """A task's decode segments, its print_timing decode span (`eval_s`, `eval_tokens`)
    and the span its segments cover (`segments_s`)."""

    task: int
    segments: tuple[Segment, ...]
    eval_s: float
    eval_tokens: int
    segments_s: float


@dataclass
class LogClock:
    """The timed pieces of a whole log, and what could not be timed: tasks that shared
    the clock with another slot (`overlapping`), tasks without print_timing or without
    a finished round (`untimed`). `chunks` are the prompts' forwards of the timed tasks;
    `drafters` the server's chain (llama.cpp's names, in the order it asks them);
    `state_bytes` is the speculative checkpoint's size as the log gives it (None: no
    checkpoint); `shape` the target's as its load prints it (None: not printed, or no MTP
    layer); `n_rs_seq` the per-position recurrent states its target keeps, `graph_nodes`
    the nodes of its target's forward graph and `recurrent_layers` the target's recurrent
    layers (None: not printed)."""

    tasks: list[TaskClock] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    overlapping: int = 0
    untimed: int = 0
    state_bytes: int | None = None
    build: str | None = None
    shape: ModelShape | None = None
    n_rs_seq: int | None = None
    graph_nodes: int | None = None
    recurrent_layers: int | None = None
    drafters: tuple[str, ...] = ()

    @property
    def segments(self) -> list[Segment]:
        """Every task's segments, in order."""
        return [s for t in self.tasks for s in t.segments]


def _name(drafter: str) -> str:
    """llama.cpp's drafter name as 0.3.24 on spell it (older builds use underscores)."""
    return drafter.replace("_", "-")


def _drafter(rnd: LlamaRound, default: str | None) -> str | None:
    """The model drafter that drafted the round (None: a plain round or an n-gram's)."""
    name = rnd.spec_type or default
    if not rnd.speculative or name is None:
        return None
    name = _name(name)
    return name if name.startswith(MODEL_DRAFTER_PREFIX) else None


def _called(rnd: LlamaRound, chain: tuple[str, ...], default: str | None, asked: bool
            ) -> tuple[str, ...]:
    """The drafters a round's call ran: a chain asks each in turn until one drafts, so a
    speculative round ran those up to the one that drafted, a plain round that asked
    (`asked`: a draft was possible) all of them."""
    if not rnd.speculative:
        return chain if asked else ()
    name = _name(rnd.spec_type or default or "")
    return chain[:chain.index(name) + 1] if name in chain else (name,) if name else ()


def _rebuilt(batches: tuple[int, ...], before: int | None) -> tuple[bool, ...]:
    """For each of a round's forwards (their batches, in order), whether it changed the
    batch of the forward before it (`before`: the previous round's last; None after the
    prompt, whose batch no decode forward has)."""
    return tuple(a != b for a, b in zip((before, *batches), batches, strict=False))


@dataclass(frozen=True)
class _Start:
    """Where a round's segment begins: the time, the log line, the batch of the target's
    forward before it (None: the prompt's)."""

    t: float
    line: int
    batch: int | None


def _segment(task: LlamaTask, rnd: LlamaRound, start: _Start, default: str | None,
             passes: Passes, chain: tuple[str, ...], asks: list[int]) -> Segment:
    verify = (rnd.drafted + 1 if rnd.speculative else 1, rnd.n_tokens)
    forwards = (verify, *((b, rnd.n_tokens) for b in rnd.replays))
    drafter = _drafter(rnd, default)
    drafted = 0 if drafter is None else (rnd.spec_gen or rnd.drafted)
    assert rnd.t_end is not None  # only timed rounds come here
    end = rnd.t_end
    asked = bisect_left(asks, start.line) < bisect_left(asks, rnd.last_line)
    if passes.forwards:  # the build brackets every call: the drafters' is timed whole
        calls = _within(passes.calls, start.t, end)
        draft_s = sum(calls) if calls else None
    else:
        span = rnd.draft_span if drafter is not None else None
        draft_s = None if span is None else span[1] - span[0]
    return Segment(task=task.task, seconds=end - start.t,
                   forwards=forwards,
                   drafter=drafter, drafted=drafted, saves=int(rnd.spec_ckpt is not None),
                   restores=len(rnd.restores), speculative=rnd.speculative,
                   draft_s=draft_s,
                   pass_s=None if passes.drafter is None else _within(passes.spans, start.t, end),
                   pass_drafter=passes.drafter,
                   forward_s=_within(passes.forwards, start.t, end) if passes.forwards else None,
                   rebuilt=_rebuilt(tuple(b for b, _ in forwards), start.batch),
                   lines=rnd.last_line - start.line,
                   called=_called(rnd, chain, default, asked))


def _chunks(task: LlamaTask, passes: Passes) -> list[Chunk]:
    """A task's prompt forwards: each `cached n_tokens` line to the next one (the last to
    the prompt's end), timed by the target's compute brackets between them where the
    build logs them (the drafter's chained ones its pass), else by the lines."""
    first = task.first_token
    if task.prompt_tokens is None or first is None or first.t is None:
        return []
    cached = [r for r in task.prompt_phase
              if isinstance(r, Count) and r.kind is RecordKind.CACHED and r.t is not None]
    ends = [(c.n, c.t) for c in cached[1:]] + [(task.prompt_tokens, first.t)]
    out = []
    for c, (end, stop) in zip(cached, ends, strict=True):
        assert c.t is not None and stop is not None
        if end <= c.n:
            continue
        if not passes.forwards:
            out.append(Chunk(task.task, end - c.n, c.n, stop - c.t))
            continue
        forward = _within(passes.forwards, c.t, stop)
        if forward:
            passed = sum(_within(passes.spans, c.t, stop)) if passes.drafter else None
            out.append(Chunk(task.task, end - c.n, c.n, sum(forward), passed,
                             passes.drafter if passed is not None else None))
    return out


def _span(task: LlamaTask) -> tuple[float, float] | None:
    """A task's time from its start to its last round's end (None: not timed)."""
    ends = [r.t_end for r in task.rounds if r.t_end is not None]
    if task.t is None:
        return None
    return task.t, max(ends, default=task.t)


def _overlaps(tasks: list[LlamaTask]) -> set[int]:
    """Indices of tasks whose span meets another's."""
    spans = [_span(t) for t in tasks]
    return {i for i, a in enumerate(spans) for j, b in enumerate(spans)
            if i != j and a is not None and b is not None and a[0] < b[1] and b[0] < a[1]}


def _task_clock(task: LlamaTask, default: str | None, passes: Passes, chain: tuple[str, ...],
                asks: list[int]) -> TaskClock | None:
    timing = task.timings.get(TimingPhase.EVAL)
    first = task.first_token
    if timing is None or first is None or first.t is None:
        return None
    start = _Start(first.t, first.line, None)
    segments: list[Segment] = []
    for rnd in task.rounds:
        if rnd.t_end is None or not rnd.complete:
            break
        seg = _segment(task, rnd, start, default, passes, chain, asks)
        segments.append(seg)
        start = _Start(rnd.t_end, rnd.last_line, seg.forwards[-1][0])
    if not segments:
        return None
    return TaskClock(task=task.task, segments=tuple(segments), eval_s=timing.ms / 1e3,
                     eval_tokens=timing.tokens, segments_s=start.t - first.t)


def log_clock(reading: LogReading, name: str = "the log") -> LogClock:
    """The timed segments and prompt forwards of a parsed log; a log that has none says
    why in one line (`name` is what it calls the log)."""
    if not any(r.t is not None for r in reading.records):
        raise LogClockError(f"{name} has no timestamps: start llama-server with "
                            "--log-timestamps (and -v) so every line carries its time")
    fold = fold_tasks(reading.records)
    if not any(t.rounds for t in fold.tasks):
        raise LogClockError(f"{name} shows no decode rounds: start llama-server with -v "
                            "(verbose) so each round is logged")
    drafters = reading.server.model_drafters or reading.server.implementations
    default = drafters[0] if len(drafters) == 1 else None
    chain = tuple(_name(d) for d in reading.server.spec_types)
    # `max possible draft: N` as the slot asks its drafters (N > 0: a draft was possible)
    asks = [r.line for r in reading.records
            if r.kind is RecordKind.DRAFT_BEGIN and isinstance(r, Count) and r.n > 0]
    clock = LogClock(build=reading.server.build, shape=model_shape(reading.server),
                     n_rs_seq=reading.server.n_rs_seq, graph_nodes=reading.server.graph_nodes,
                     recurrent_layers=reading.server.recurrent_layers, drafters=chain)
    passes = _passes(reading)
    overlap = _overlaps(fold.tasks)
    for i, task in enumerate(fold.tasks):
        if i in overlap:
            clock.overlapping += 1
            continue
        timed = _task_clock(task, default, passes, chain, asks)
        if timed is None:
            clock.untimed += 1
        else:
            clock.tasks.append(timed)
            clock.chunks += _chunks(task, passes)
        for rnd in task.rounds:
            if rnd.spec_ckpt is not None and rnd.spec_ckpt.size_mib and clock.state_bytes is None:
                clock.state_bytes = round(rnd.spec_ckpt.size_mib * 2**20)
            for r in rnd.restores:
                if r.size_mib:  # a restore logs the exact bytes (converted to MiB)
                    clock.state_bytes = round(r.size_mib * 2**20)
    if not clock.tasks:
        raise LogClockError(f"{name} has no finished request with print_timing and a "
                            f"timed round ({clock.overlapping} overlapped another slot, "
                            f"{clock.untimed} untimed)")
    return clock
