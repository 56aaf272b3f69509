"""Fold a llama-server log's records into tasks (one request each) and their speculative
rounds: pure bookkeeping over the records, in line order, per slot.

A round opens at `generate_draft` (a verify batch) or `slot decode token` (a plain step);
the draft candidates and the speculative checkpoint logged before it belong to it. After
a partial acceptance that restored the speculative checkpoint, the next `generate_draft`
of the slot is that round's replay (the accepted tokens verified again), not a new
round. A round is whole once every token it kept was emitted (`add accepted tokens`
says how many), or once the task stopped inside it. A log cut mid-round leaves that
round open: it is dropped and reported (`Truncation`).
"""

from dataclasses import dataclass, field

from engine.llama.logrecords import (
    Accepted,
    AccPerPos,
    Candidate,
    Checkpoint,
    Count,
    Decode,
    Draft,
    DraftTotals,
    LcpCheck,
    Record,
    RecordKind,
    Released,
    SlotSelected,
    Stopped,
    StopReason,
    Timing,
    TimingPhase,
    Token,
    Verdict,
)

K = RecordKind
# Records of the prompt phase, kept in order: the ledger replays them as they happened.
PROMPT_PHASE = (K.CACHED, K.CTX_CREATED, K.CTX_RESTORED, K.CTX_ERASED, K.FULL_REPROCESS,
                K.N_PAST_SET)


@dataclass
class LlamaRound:
    """One round of one task. `n_tokens` is the slot length when it began; `drafted`
    the first verification's draft size (0: a plain step); `draft_ids` the drafted ids
    where the log names them (model drafters' candidate 0), else empty; `replays` the
    batch size of each verification after a speculative-checkpoint restore."""

    first_line: int
    t: float | None
    last: int
    n_tokens: int
    drafted: int = 0
    draft_ids: list[int] = field(default_factory=list)
    spec_ckpt: Checkpoint | None = None
    restores: list[Checkpoint] = field(default_factory=list)
    replays: list[int] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    kept: Accepted | None = None
    tokens: list[int] = field(default_factory=list)
    done: Verdict | None = None
    stop: StopReason | None = None
    last_line: int = 0
    t_end: float | None = None

    @property
    def speculative(self) -> bool:
        """Whether the round verified drafts."""
        return self.drafted > 0

    @property
    def complete(self) -> bool:
        """Whether every token the round kept was emitted, or the task stopped in it."""
        if not self.speculative:
            return len(self.tokens) == 1
        if self.kept is None:
            return False
        return self.done is not None or len(self.tokens) == self.kept.ids or (
            self.stop is not None and bool(self.tokens))


@dataclass
class LlamaTask:
    """One request on one slot: how the slot was chosen and reused, the prompt phase in
    order, the first token, the rounds, and the engine's own totals."""

    slot: int
    task: int
    first_line: int
    t: float | None
    selection: SlotSelected | None = None
    lcp: LcpCheck | None = None
    prompt_tokens: int | None = None
    prompt_phase: list[Record] = field(default_factory=list)
    first_token: Token | None = None
    rounds: list[LlamaRound] = field(default_factory=list)
    stop: StopReason | None = None
    timings: dict[TimingPhase, Timing] = field(default_factory=dict)
    totals: DraftTotals | None = None
    acc_per_pos: AccPerPos | None = None
    released: Released | None = None
    last_line: int = 0

    @property
    def n_past(self) -> int | None:
        """Tokens of the slot the prompt kept (the first `cached n_tokens`)."""
        cached = [r for r in self.prompt_phase if isinstance(r, Count) and r.kind is K.CACHED]
        return cached[0].n if cached else None

    @property
    def generated(self) -> int:
        """Tokens emitted (the first one included), as the log's token lines show them."""
        return (self.first_token is not None) + sum(len(r.tokens) for r in self.rounds)

    @property
    def generated_logged(self) -> int | None:
        """Tokens generated: the token lines' count, else print_timing's (a log without
        -v), else None."""
        if self.generated:
            return self.generated
        timing = self.timings.get(TimingPhase.EVAL)
        return timing.tokens if timing is not None else None


@dataclass(frozen=True)
class Truncation:
    """A task the log ends inside, at `line`. Its last round, if the log cuts it, is taken
    out of the task's rounds (`partial`: it committed nothing) with the tokens it had
    emitted and the restores it had done by then."""

    slot: int
    task: int
    line: int
    partial: LlamaRound | None

    @property
    def dropped_tokens(self) -> int:
        """Tokens the partial round emitted before the log ends."""
        return len(self.partial.tokens) if self.partial is not None else 0

    def to_dict(self) -> dict[str, int | bool]:
        """JSON form (the stored provenance)."""
        p = self.partial
        return {"slot": self.slot, "task": self.task, "line": self.line,
                "dropped_round": p is not None, "dropped_tokens": self.dropped_tokens,
                "restores": len(p.restores) if p is not None else 0}


@dataclass
class TaskFold:
    """The tasks in the order they started, what the log ends inside, and records that
    belong to no started task (a log that begins mid-request)."""

    tasks: list[LlamaTask] = field(default_factory=list)
    truncated: list[Truncation] = field(default_factory=list)
    orphans: int = 0
    resets: int = 0


class _Folder:
    """The per-slot state of the fold."""

    def __init__(self) -> None:
        self.out = TaskFold()
        self.by_id: dict[int, LlamaTask] = {}
        self.current: dict[int, LlamaTask] = {}
        self.selection: dict[int, SlotSelected] = {}
        self.lcp: dict[int, LcpCheck] = {}
        self.candidates: dict[int, list[Candidate]] = {}
        self.spec: dict[int, Checkpoint] = {}
        self.open: dict[int, LlamaRound] = {}

    def apply(self, r: Record) -> None:
        """Fold one record."""
        if r.kind is K.DRAFTER_RESET:
            self.out.resets += 1
        elif r.kind is K.CANDIDATE:
            assert isinstance(r, Candidate) and r.slot is not None
            self.candidates.setdefault(r.slot, []).append(r)
        elif r.kind is K.SLOT_SELECTED:
            assert isinstance(r, SlotSelected) and r.slot is not None
            self.selection[r.slot] = r
            self.lcp = {s: c for s, c in self.lcp.items() if s == r.slot}
        elif r.kind is K.LCP_CHECK:
            assert isinstance(r, LcpCheck) and r.slot is not None
            self.lcp[r.slot] = r
        elif r.kind is K.TASK_STARTED:
            self._start(r)
        else:
            task = self.by_id.get(r.task if r.task is not None else -1)
            if task is None:
                self.out.orphans += 1
                return
            task.last_line = r.line
            self._task_record(task, r)

    def _start(self, r: Record) -> None:
        assert r.slot is not None and r.task is not None
        task = LlamaTask(r.slot, r.task, r.line, r.t, selection=self.selection.pop(r.slot, None),
                         lcp=self.lcp.pop(r.slot, None), last_line=r.line)
        self.by_id[r.task] = self.current[r.slot] = task
        self.candidates.pop(r.slot, None)
        self.out.tasks.append(task)

    def _task_record(self, task: LlamaTask, r: Record) -> None:
        slot = task.slot
        rnd = self.open.get(slot)
        if r.kind is K.PROMPT:
            assert isinstance(r, Count)
            task.prompt_tokens = r.n
        elif r.kind in PROMPT_PHASE:
            task.prompt_phase.append(r)
        elif r.kind is K.SPEC_CREATED:
            assert isinstance(r, Checkpoint)
            self.spec[slot] = r
        elif isinstance(r, Draft):
            if rnd is not None and rnd.restores and rnd.kept is None:
                rnd.replays.append(r.n_draft)
            else:
                self._open(task, r, r.n_draft)
        elif isinstance(r, Decode):
            self._open(task, r, 0)
        elif r.kind is K.SPEC_RESTORED and rnd is not None:
            assert isinstance(r, Checkpoint)
            rnd.restores.append(r)
        elif r.kind is K.VERDICT and rnd is not None:
            assert isinstance(r, Verdict)
            rnd.verdicts.append(r)
        elif isinstance(r, Accepted) and rnd is not None:
            rnd.kept = r
        elif isinstance(r, Token):
            self._token(task, rnd, r)
        elif isinstance(r, Stopped):
            task.stop = r.reason
            if rnd is not None:
                rnd.stop = r.reason
        elif r.kind is K.ROUND_DONE and rnd is not None:
            assert isinstance(r, Verdict)
            rnd.done = r
            self._close(slot, r)
        elif isinstance(r, Timing):
            task.timings[r.phase] = r
        elif isinstance(r, DraftTotals):
            task.totals = r
        elif isinstance(r, AccPerPos):
            task.acc_per_pos = r
        elif isinstance(r, Released):
            task.released = r
            if rnd is not None and rnd.complete:
                self._close(slot, r)

    def _open(self, task: LlamaTask, r: Draft | Decode, drafted: int) -> None:
        rnd = LlamaRound(r.line, r.t, r.last, r.n_tokens, drafted=drafted, last_line=r.line)
        cands = sorted((c for c in self.candidates.pop(task.slot, []) if c.rank == 0),
                       key=lambda c: c.pos)
        if drafted and [c.pos for c in cands[:drafted]] == list(range(drafted)):
            rnd.draft_ids = [c.token for c in cands[:drafted]]
        if drafted:
            rnd.spec_ckpt = self.spec.pop(task.slot, None)
        self.open[task.slot] = rnd
        task.rounds.append(rnd)

    def _token(self, task: LlamaTask, rnd: LlamaRound | None, r: Token) -> None:
        if rnd is None:
            if task.first_token is None:
                task.first_token = r
            return
        rnd.tokens.append(r.token)
        rnd.last_line, rnd.t_end = r.line, r.t
        if not rnd.speculative or rnd.stop is not None:
            self._close(task.slot, r)

    def _close(self, slot: int, r: Record) -> None:
        rnd = self.open.pop(slot, None)
        if rnd is not None:
            rnd.last_line, rnd.t_end = r.line, r.t

    def finish(self) -> TaskFold:
        """The fold, with each task the log ends inside reported and its open round
        dropped."""
        for task in self.out.tasks:
            if task.released is not None:
                continue
            rnd = self.open.pop(task.slot, None) if self.current.get(task.slot) is task else None
            partial = rnd if rnd is not None and not rnd.complete else None
            if partial is not None:
                task.rounds.remove(partial)
            self.out.truncated.append(Truncation(task.slot, task.task, task.last_line, partial))
        return self.out


def fold_tasks(records: list[Record]) -> TaskFold:
    """The tasks and rounds of a log's records."""
    folder = _Folder()
    for r in records:
        folder.apply(r)
    return folder.finish()
