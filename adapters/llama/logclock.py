"""A llama-server -v log's own clock, cut into the pieces a cost model charges.

Each round of a task (adapters/llama/taskfold) is timed by the log's line prefixes
(`M.ss.mmm.uuu`): a round's segment runs from the end of the round before it (the
first token, for the first round) to its own last line, so it holds everything the
server did for that round: the drafter's call, the speculative checkpoint saved, the
verify forward, a restore and its replay, the accept decision and the token lines.
Inside it, a model drafter's call is timed on its own where the build logs both ends
(0.3.21 on: `max possible draft` as the slot calls its drafter, `called impl` as the
drafter returns): `draft_s`, so the drafter's cost is measured, not inferred. Where the
build logs the server loop's compute brackets (0.3.36 -v: `yielding to queue` .. `done
yielding to queue`), a drafter's own pass over each forward's output (a bracket that
follows the forward's with nothing between: the MTP head over the verified tokens) is
timed too: `pass_s`, the per-round cost of serving with a drafter, which a server
without one does not pay. A model drafter asked and answering nothing (draft-mtp under
`--spec-draft-p-min`: its first token below the bar) leaves a plain round that still
ran the drafter's call: the bracket right after `max possible draft` times it, so the
plain round's forward is not charged the attempt.
The segments of a task add up to its decode time; print_timing's `eval time` says
how the server measured the same span, and the prompt phase is print_timing's
`prompt eval time` (processed tokens, milliseconds).

What a segment records are counts only (forwards by batch and context, drafted tokens
by drafter, saves, restores), so fitting them is the fitter's business
(adapters/llama/logfit.py). Tasks whose slots ran at the same time share the
clock and cannot be cut by it: they are left out and counted.
"""

from bisect import bisect_left
from dataclasses import dataclass, field

from adapters.llama.errors import LlamaError
from adapters.llama.log.reader import LogReading
from adapters.llama.log.records import Compute, RecordKind, TimingPhase
from adapters.llama.modelshape import ModelShape, model_shape
from adapters.llama.taskfold import fold_tasks
from adapters.llama.tasks import LlamaRound, LlamaTask

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
    the model drafter's call took (None: not logged, or no model drafter); `pass_s` the
    seconds of each pass the server's drafter (`pass_drafter`) made after a forward (None:
    the build logs no compute brackets, or the server has no drafter); `forward_s` the
    seconds of each of the target's forwards in it, as their compute brackets time them
    (None: the build logs none); `rebuilds` how many of its forwards had another batch
    than the target's forward before them (the task's prompt, before its first round):
    llama.cpp reuses a built graph only for a forward of the previous one's shape
    (docs/design.md#llama-forward-costs), so these forwards built and allocated theirs."""

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
    rebuilds: int = 0


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
class Prompt:
    """A task's prompt processing as print_timing reports it; `pass_s` the seconds of it
    the drafter's passes over the prompt took (the MTP head's; 0 where none is logged)."""

    task: int
    tokens: int
    seconds: float
    pass_s: float = 0.0


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
    a finished round (`untimed`). `state_bytes` is the speculative checkpoint's size as
    the log gives it (None: no checkpoint); `shape` the target's as its load prints it
    (None: not printed, or no MTP layer); `n_rs_seq` the per-position recurrent states its
    target keeps, `graph_nodes` the nodes of its target's forward graph and
    `recurrent_layers` the target's recurrent layers (None: not printed)."""

    tasks: list[TaskClock] = field(default_factory=list)
    prompts: list[Prompt] = field(default_factory=list)
    overlapping: int = 0
    untimed: int = 0
    state_bytes: int | None = None
    build: str | None = None
    shape: ModelShape | None = None
    n_rs_seq: int | None = None
    graph_nodes: int | None = None
    recurrent_layers: int | None = None

    @property
    def segments(self) -> list[Segment]:
        """Every task's segments, in order."""
        return [s for t in self.tasks for s in t.segments]


def _drafter(rnd: LlamaRound, default: str | None) -> str | None:
    name = rnd.spec_type or default
    if not rnd.speculative or name is None:
        return None
    name = name.replace("_", "-")  # builds before 0.3.24 spell names with underscores
    return name if name.startswith(MODEL_DRAFTER_PREFIX) else None


def _attempt(rnd: LlamaRound, start: float, passes: Passes) -> tuple[str, float] | None:
    """A plain round's unanswered call of the server's model drafter: its name and
    seconds (None: no model drafter, or not called)."""
    name = passes.drafter
    if rnd.speculative or name is None or not name.startswith(MODEL_DRAFTER_PREFIX):
        return None
    assert rnd.t_end is not None
    calls = _within(passes.calls, start, rnd.t_end)
    return (name, sum(calls)) if calls else None


def _rebuilds(batches: tuple[int, ...], before: int | None) -> int:
    """How many of a round's forwards (their batches, in order) changed the batch of the
    forward before them (`before`: the previous round's last; None after the prompt,
    whose batch no decode forward has)."""
    return sum(a != b for a, b in zip((before, *batches), batches, strict=False))


def _segment(task: LlamaTask, rnd: LlamaRound, start: float, default: str | None,
             passes: Passes, before: int | None) -> Segment:
    verify = (rnd.drafted + 1 if rnd.speculative else 1, rnd.n_tokens)
    forwards = (verify, *((b, rnd.n_tokens) for b in rnd.replays))
    drafter = _drafter(rnd, default)
    drafted = 0 if drafter is None else (rnd.spec_gen or rnd.drafted)
    assert rnd.t_end is not None  # only timed rounds come here
    span = rnd.draft_span if drafter is not None else None
    draft_s = None if span is None else span[1] - span[0]
    attempt = _attempt(rnd, start, passes)
    if attempt is not None:  # the call's drafter with nothing drafted: its fixed cost
        drafter, draft_s = attempt
    end = rnd.t_end
    return Segment(task=task.task, seconds=end - start,
                   forwards=forwards,
                   drafter=drafter, drafted=drafted, saves=int(rnd.spec_ckpt is not None),
                   restores=len(rnd.restores), speculative=rnd.speculative,
                   draft_s=draft_s,
                   pass_s=None if passes.drafter is None else _within(passes.spans, start, end),
                   pass_drafter=passes.drafter,
                   forward_s=_within(passes.forwards, start, end) if passes.forwards else None,
                   rebuilds=_rebuilds(tuple(b for b, _ in forwards), before))


def _prompt_passes(task: LlamaTask, passes: Passes) -> float:
    """The seconds of the drafter's passes from a task's start to its first token."""
    if passes.drafter is None or task.t is None or task.first_token is None or (
            task.first_token.t is None):
        return 0.0
    return sum(_within(passes.spans, task.t, task.first_token.t))


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


def _task_clock(task: LlamaTask, default: str | None, passes: Passes) -> TaskClock | None:
    timing = task.timings.get(TimingPhase.EVAL)
    if timing is None or task.first_token is None or task.first_token.t is None:
        return None
    start = task.first_token.t
    segments: list[Segment] = []
    for rnd in task.rounds:
        if rnd.t_end is None or not rnd.complete:
            break
        before = segments[-1].forwards[-1][0] if segments else None
        segments.append(_segment(task, rnd, start, default, passes, before))
        start = rnd.t_end
    if not segments:
        return None
    return TaskClock(task=task.task, segments=tuple(segments), eval_s=timing.ms / 1e3,
                     eval_tokens=timing.tokens, segments_s=start - task.first_token.t)


def log_clock(reading: LogReading, name: str = "the log") -> LogClock:
    """The timed segments and prompts of a parsed log; a log that has none says why in
    one line (`name` is what it calls the log)."""
    if not any(r.t is not None for r in reading.records):
        raise LogClockError(f"{name} has no timestamps: start llama-server with "
                            "--log-timestamps (and -v) so every line carries its time")
    fold = fold_tasks(reading.records)
    if not any(t.rounds for t in fold.tasks):
        raise LogClockError(f"{name} shows no decode rounds: start llama-server with -v "
                            "(verbose) so each round is logged")
    drafters = reading.server.model_drafters or reading.server.implementations
    default = drafters[0] if len(drafters) == 1 else None
    clock = LogClock(build=reading.server.build, shape=model_shape(reading.server),
                     n_rs_seq=reading.server.n_rs_seq, graph_nodes=reading.server.graph_nodes,
                     recurrent_layers=reading.server.recurrent_layers)
    passes = _passes(reading)
    overlap = _overlaps(fold.tasks)
    for i, task in enumerate(fold.tasks):
        if i in overlap:
            clock.overlapping += 1
            continue
        prompt = task.timings.get(TimingPhase.PROMPT)
        if prompt is not None and prompt.tokens > 0:
            clock.prompts.append(Prompt(task.task, prompt.tokens, prompt.ms / 1e3,
                                        _prompt_passes(task, passes)))
        timed = _task_clock(task, default, passes)
        if timed is None:
            clock.untimed += 1
        else:
            clock.tasks.append(timed)
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
