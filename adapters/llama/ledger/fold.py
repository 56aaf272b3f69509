"""Fold a llama-server log's records into tasks (one request each) and their speculative
rounds: pure bookkeeping over the records, in line order, per slot.

A round opens at `generate_draft` (a verify batch) or `slot decode token` (a plain step);
the draft candidates and the speculative checkpoint logged before it belong to it, and so
does the line naming the drafter of the chain that drafted (it names no slot: it is the
one whose history length and draft size are the batch's). After
a partial acceptance that restored the speculative checkpoint, the next `generate_draft`
of the slot is that round's replay (the accepted tokens verified again), not a new
round. A round is whole once every token it kept was emitted (`add accepted tokens`
says how many), or once the task stopped inside it. A log cut mid-round leaves that
round open: it is taken out of the task's rounds and reported (`Truncation`).

Builds before 0.3.24 name no slot on their draft candidates, and 0.3.21's draft model
logs its prefix reuse with no slot either: those belong to the next round a slot opens
(its drafter runs just before). A drafter's statistics, printed with the task's totals,
belong to the task that printed them.

A log is often a piece: a record of a task the log never showed starting (it began
before the piece) opens that task as one the log begins inside (`head_cut`), and a task
that starts on a slot whose previous task never finished (its end is not in the log: the
piece was cut, the server lost it) ends that one as cut. ik_llama.cpp's prompt-cache line
names no slot or task: it belongs to the task that started last; the context checkpoint it
takes as an answer ends, after the task's timings, is no step of the task's prompt.
"""

from adapters.llama.ledger.tasks import (
    PROMPT_PHASE,
    CutReason,
    LlamaRound,
    LlamaTask,
    Overflow,
    TaskFold,
    Truncation,
)
from adapters.llama.log.records import (
    Accepted,
    AccPerPos,
    Candidate,
    Checkpoint,
    Count,
    Decode,
    Draft,
    DrafterCalled,
    DraftReuse,
    DraftTotals,
    LcpCheck,
    Past,
    Record,
    RecordKind,
    Released,
    SamplerChain,
    SamplerParams,
    Server,
    SlotSelected,
    SpecStats,
    Stopped,
    Timing,
    TimingPhase,
    Token,
    Verdict,
)
from adapters.llama.log.server_lines import ServerEventKind

K = RecordKind
_PENDING = 64  # drafter lines kept while their batches are awaited
_BURST = 64  # lines between two KV-cache overflow lines of one burst, or its failed tasks
_OVERFLOW = (ServerEventKind.KV_FULL, ServerEventKind.CONTEXT_EXCEEDED)


class TaskFolder:
    """The per-slot state of the fold, record by record (`specledger watch` folds a live
    log with one, forgetting each task once it is recorded). `adopt`: a record of a task
    the log never showed starting opens that task as one the log begins inside (an
    import's piece); a watch, which resumes at the start of the oldest request it had open,
    counts such records as orphans of requests it recorded before."""

    def __init__(self, adopt: bool = True) -> None:
        self.adopt = adopt
        self.out = TaskFold()
        self.by_id: dict[int, LlamaTask] = {}
        self.current: dict[int, LlamaTask] = {}
        self.selection: dict[int, SlotSelected] = {}
        self.lcp: dict[int, LcpCheck] = {}
        self.candidates: dict[int | None, list[Candidate]] = {}
        self.draft_lost: list[DraftReuse] = []  # 0.3.21 draft model, before its round
        self.timed: LlamaTask | None = None  # the task whose totals were printed last
        self.spec: dict[int, Checkpoint] = {}
        self.open: dict[int, LlamaRound] = {}
        self.called: list[DrafterCalled] = []
        self.draft_begin: dict[int, float | None] = {}  # each slot's drafter call, begun
        self.chain: dict[int, SamplerChain] = {}  # logged as the slot launches its task
        self.params: dict[int, SamplerParams] = {}
        self.prompt_loaded = False  # the prompt cache loaded a prompt for the next task

    def apply(self, r: Record) -> None:
        """Fold one record."""
        if r.kind is K.COMPUTE:
            return  # the server loop's, no slot's: the clock reads it (logclock)
        if isinstance(r, Server):
            self._server(r)
        elif r.kind is K.DRAFTER_RESET:
            self.out.resets += 1
        elif isinstance(r, DrafterCalled):
            # One per slot drafting now; older ones drafted batches that never ran.
            self.called = [*self.called[-_PENDING:], r]
        elif isinstance(r, Candidate):
            self.candidates.setdefault(r.slot, []).append(r)
        elif isinstance(r, SpecStats):
            if self.timed is not None:
                self.timed.spec_stats[r.spec_type] = r
        elif isinstance(r, DraftReuse) or r.kind is K.DRAFT_CKPT_DELETED:
            self.out.draft_reuse_logged = True
            if isinstance(r, DraftReuse) and r.kind is K.DRAFT_CKPT_LOST:
                self.draft_lost.append(r)
        elif r.kind is K.SLOT_SELECTED:
            assert isinstance(r, SlotSelected) and r.slot is not None
            self.selection[r.slot] = r
            self.lcp = {s: c for s, c in self.lcp.items() if s == r.slot}
        elif r.kind is K.LCP_CHECK:
            assert isinstance(r, LcpCheck) and r.slot is not None
            self.lcp[r.slot] = r
        elif isinstance(r, SamplerChain):
            assert r.slot is not None
            self.chain[r.slot] = r
        elif isinstance(r, SamplerParams):
            assert r.slot is not None
            self.params[r.slot] = r
        elif r.kind is K.PROMPT_LOADED:
            self.prompt_loaded = True
        elif r.kind is K.TASK_STARTED:
            self._start(r, head_cut=False)
        elif isinstance(r, Past) and r.task is None:
            last = self.out.tasks[-1] if self.out.tasks else None
            if last is not None and last.past is None and not last.prompt_phase:
                last.past = r
        else:
            task = self.by_id.get(r.task if r.task is not None else -1)
            if task is None:
                if not self.adopt or r.task is None or r.task < 0 or r.slot is None:
                    self.out.orphans += 1
                    return
                task = self._start(r, head_cut=True)
            task.last_line = r.line
            self._task_record(task, r)

    def _server(self, r: Server) -> None:
        """An error sent to a task; a KV cache with no room, and the tasks it failed."""
        last = self.out.overflows[-1] if self.out.overflows else None
        near = last is not None and r.line - last.last_line <= _BURST
        if r.what is ServerEventKind.ERROR and r.task is not None:
            task = self.by_id.get(r.task)
            if task is not None and task.error is None:
                task.error = r.text
            if near and last is not None and last.exceeded:
                last.failed.append(r.task)
        elif r.what in _OVERFLOW:
            if not near or last is None:
                last = Overflow(r.line, r.t, r.line, in_flight=[
                    (t.slot, t.task, t.tokens_seen) for t in self.current.values()
                    if t.released is None])
                self.out.overflows.append(last)
            last.last_line = r.line
            last.retries += r.what is ServerEventKind.KV_FULL
            last.exceeded = last.exceeded or r.what is ServerEventKind.CONTEXT_EXCEEDED

    def _start(self, r: Record, head_cut: bool) -> LlamaTask:
        """A task the log shows starting, or (`head_cut`) one it shows a record of first."""
        assert r.slot is not None and r.task is not None
        prev = self.current.get(r.slot)
        if prev is not None and prev.released is None:
            self._cut(prev, CutReason.SLOT_REUSED)
        task = LlamaTask(r.slot, r.task, r.line, r.t, last_line=r.line, head_cut=head_cut)
        if not head_cut:
            task.prompt_loaded, self.prompt_loaded = self.prompt_loaded, False
            task.selection = self.selection.pop(r.slot, None)
            task.lcp = self.lcp.pop(r.slot, None)
            task.sampler_chain = self.chain.pop(r.slot, None)
            task.sampler_params = self.params.pop(r.slot, None)
        self.by_id[r.task] = self.current[r.slot] = task
        self.candidates.pop(r.slot, None)
        self.out.tasks.append(task)
        return task

    def _task_record(self, task: LlamaTask, r: Record) -> None:
        slot = task.slot
        rnd = self.open.get(slot)
        if r.kind is K.PROMPT:
            assert isinstance(r, Count)
            task.prompt_tokens = r.n
        elif isinstance(r, Past):
            if task.past is None:
                task.past = r
        elif r.kind is K.CKPT_CHECK:
            assert isinstance(r, Count)
            if task.ckpt_threshold is None:
                task.ckpt_threshold = r.n
        elif r.kind is K.CTX_CREATED and TimingPhase.PROMPT in task.timings:
            # ik_llama.cpp checkpoints the slot once more as the answer ends, after its
            # timings (its logger thread may print both after the task's release, or the
            # next task's start): the next prompt's to restore, no step of this one.
            pass
        elif r.kind in PROMPT_PHASE:
            task.prompt_phase.append(r)
        elif r.kind is K.DRAFT_BEGIN:
            self.draft_begin[slot] = r.t
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
            self.timed = task
        elif isinstance(r, AccPerPos):
            task.acc_per_pos = r
        elif isinstance(r, Released):
            task.released = r
            if rnd is not None and rnd.complete:
                self._close(slot, r)

    def _open(self, task: LlamaTask, r: Draft | Decode, drafted: int) -> None:
        at = r.position if isinstance(r, Decode) else r.n_tokens
        rnd = LlamaRound(r.line, r.t, r.last, at, drafted=drafted, last_line=r.line,
                         draft_recomputed=sum(d.reuse_n for d in self.draft_lost))
        self.draft_lost = []
        begin = self.draft_begin.pop(task.slot, None)
        named = [*self.candidates.pop(task.slot, []), *self.candidates.pop(None, [])]
        cands = sorted((c for c in named if c.rank == 0), key=lambda c: c.pos)
        if drafted and [c.pos for c in cands[:drafted]] == list(range(drafted)):
            rnd.draft_ids = [c.token for c in cands[:drafted]]
        if drafted:
            rnd.spec_ckpt = self.spec.pop(task.slot, None)
            called = self._drafter(r.n_tokens, drafted)
            if called is not None:
                rnd.spec_type, rnd.spec_gen = called.spec_type, called.gen
                if begin is not None and called.t is not None:
                    rnd.draft_span = (begin, called.t)
        self.open[task.slot] = rnd
        task.rounds.append(rnd)

    def _drafter(self, hist: int, gen: int) -> DrafterCalled | None:
        """The line naming the drafter of a batch of `gen` drafts after `hist` tokens
        (its draft size is the one it logged; None: not logged); the drafts of every slot are made
        before their batches are verified, so the match is taken out of the pending ones.
        Before 0.3.24 the server cut a draft longer than the answer's remaining tokens
        after the drafter logged it: a longer draft after the same history is that one."""
        for cut in (False, True):
            for i, c in enumerate(self.called):
                if c.hist == hist and (c.gen > gen if cut else c.gen == gen):
                    del self.called[i]
                    return c
        return None

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

    def forget(self, task: LlamaTask) -> None:
        """Drop a task that was recorded, so a fold that never ends stays small."""
        self.out.tasks.remove(task)
        self.by_id.pop(task.task, None)
        if self.current.get(task.slot) is task:
            del self.current[task.slot]
            self.open.pop(task.slot, None)

    def _cut(self, task: LlamaTask, why: CutReason) -> None:
        """End a task that never finished in the log, its open round dropped."""
        rnd = self.open.pop(task.slot, None) if self.current.get(task.slot) is task else None
        partial = rnd if rnd is not None and not rnd.complete else None
        if partial is not None:
            task.rounds.remove(partial)
        if self.current.get(task.slot) is task:
            del self.current[task.slot]
        self.out.truncated.append(Truncation(task.slot, task.task, task.last_line, partial, why))

    def finish(self) -> TaskFold:
        """The fold, with each task the log ends inside reported and its open round
        dropped."""
        cut = {t.task for t in self.out.truncated}
        for task in self.out.tasks:
            if task.released is None and task.task not in cut:
                self._cut(task, CutReason.LOG_ENDS)
        return self.out


def fold_tasks(records: list[Record]) -> TaskFold:
    """The tasks and rounds of a log's records."""
    folder = TaskFolder()
    for r in records:
        folder.apply(r)
    return folder.finish()
