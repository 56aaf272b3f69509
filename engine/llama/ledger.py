"""A llama-server log as a specledger session: each task (request) is a turn of its slot,
fired through the same round machine as our engine, with the same triggers and payload
keys (engine/turn.py, engine/round.py), so the projection, the postmortem detectors and
`show` read it as they read our own sessions.

A turn: `start_turn` (the slot's reuse: the kept prefix `n_past`, the common prefix and
f_keep over the server's slot length), `ctx_restore` for a context-checkpoint restore or a
full re-processing, `prefill` per prompt batch with `ctx_save` where a context checkpoint
was taken, the rounds (ledger_rounds), the checks, `end_turn` with the turn's metrics
(a metric the log cannot give is None and named in the metrics' `unknown`). The units of
all slots are fired in the order the log shows them, so interleaved slots stay
interleaved. The engine's own totals and the client's answers are checked against the
imported rounds; a disagreement is an `invariant_violation`, never a correction.
"""

import heapq
import itertools
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.llama.crosscheck import RoundFold, response_violations, totals_violations
from engine.llama.ledger_rounds import Step, accepted_drafts, partial_steps, round_steps
from engine.llama.logread import LogReading
from engine.llama.logrecords import Checkpoint, Count, Record, RecordKind, TimingPhase
from engine.llama.responses import ResponseFacts, match_responses
from engine.llama.tasks import LlamaTask, TaskFold, Truncation, fold_tasks
from engine.metrics import TurnMetrics
from fsm.event import Event
from fsm.invariants import Invariant, Violation, check_turn_end
from fsm.machine import RoundMachine
from fsm.states import Trigger

K = RecordKind
MIB = 2**20
# Never in a llama-server log: time spent rolling back and restoring context state.
NOT_LOGGED = ("rollback_s", "repair_s")


class Sink(Protocol):
    """Where the ledger's events go: a session journal (engine.session.Journal)."""

    def append(self, event: Event) -> None:
        """Take one event."""

    def end_unit(self) -> None:
        """Everything appended so far forms whole units."""


@dataclass
class LedgerResult:
    """The imported turns (metrics as recorded, in the order they ended), the fold they
    came from, violations recorded, answers matched to tasks, events fired, and the
    tasks the log ends inside."""

    turns: list[TurnMetrics]
    fold: TaskFold
    violations: int = 0
    responses_matched: int = 0
    events: int = 0
    truncated: list[Truncation] = field(default_factory=list)


@dataclass
class _Slot:
    """A slot across its turns: the server's slot length after its last task (None: the
    log began while it may have held something), our view of its tokens and the state's
    position after the last commit."""

    machine: RoundMachine
    length: int | None
    tokens: list[int | None] = field(default_factory=list)
    position: int = 0


@dataclass
class _Turn:
    """One turn being imported: its metrics, what of them is unknown, its prompt."""

    stats: TurnMetrics
    prompt: list[int | None]
    unknown: set[str] = field(default_factory=lambda: set(NOT_LOGGED))
    fold: list[tuple[int, int]] = field(default_factory=list)


class _Ledger:
    def __init__(self, reading: LogReading, journal: Sink) -> None:
        self.server = reading.server
        self.journal = journal
        self.rounds_visible = any(r.kind in (K.DRAFT, K.DECODE, K.TOKEN)
                                  for r in reading.records)
        self.drafter = ",".join(self.server.spec_types) or "none"
        self.now = 0.0
        self.events = 0
        self.violations = 0
        self._seq = itertools.count(1)
        self.slots: dict[int, _Slot] = {}
        self.turns: list[TurnMetrics] = []

    def append(self, event: Event) -> None:
        """The machines' sink: count, then pass on."""
        self.events += 1
        self.journal.append(event)

    def set_time(self, t: float | None) -> None:
        """Stamp the next events with log time `t` (kept when the line had none)."""
        if t is not None:
            self.now = t

    def slot(self, n: int) -> _Slot:
        """Slot `n`, made on first use."""
        s = self.slots.get(n)
        if s is None:
            # A log that shows the server starting shows every slot empty at first.
            empty = 0 if self.server.n_slots is not None else None
            machine = RoundMachine(n, self, self._seq.__next__, lambda: self.now)
            s = self.slots[n] = _Slot(machine, empty)
        return s

    def violate(self, m: RoundMachine, turn: _Turn, v: Violation) -> None:
        """Record one violation."""
        self.violations += 1
        turn.stats.violations += 1
        m.fire(Trigger.INVARIANT_VIOLATION, **v.to_payload())

    def task_units(self, task: LlamaTask, prompt_ids: list[int] | None,
                   resp: ResponseFacts | None, cut: Truncation | None) -> Iterator[Step]:
        """Fire one task's events; before each group of them, yield the log line and
        time it happened at (the driver interleaves the slots by line)."""
        yield task.first_line, task.t
        s = self.slot(task.slot)
        m = s.machine
        m.turn += 1
        m.round = 0
        turn = yield from self.start(task, s, prompt_ids, resp)
        self.journal.end_unit()
        for i, rnd in enumerate(task.rounds):
            if not rnd.complete:
                yield rnd.first_line, rnd.t
                self.violate(m, turn, Violation(
                    Invariant.BOOKKEEPING, f"the round at log line {rnd.first_line} never "
                    f"completed", {"line": rnd.first_line}))
                continue
            m.round += 1
            res = yield from round_steps(m, rnd, self.drafter, self.server.n_rs_seq)
            s.tokens.extend(res.block)
            s.position = res.position
            turn.stats.rounds += 1
            turn.stats.drafted += res.drafted
            turn.stats.accepted += res.accepted
            turn.stats.restores += res.restores
            if rnd.speculative:
                turn.fold.append((rnd.drafted, accepted_drafts(rnd)))
            if rnd.done is not None and rnd.done.n_tokens != res.position:
                self.violate(m, turn, Violation(
                    Invariant.BOOKKEEPING, f"llama-server's slot holds {rnd.done.n_tokens} "
                    f"tokens after the round, the imported commits {res.position}",
                    {"engine": rnd.done.n_tokens, "ledger": res.position}))
            if not (i == len(task.rounds) - 1 and rnd.stop is not None):
                m.fire(Trigger.NEXT)
            self.journal.end_unit()
        if task.released is not None:
            yield task.released.line, task.released.t
            self.finish(task, s, turn, resp)
            self.journal.end_unit()
        elif cut is not None:
            if cut.partial is not None:
                m.round += 1
                yield from partial_steps(m, cut.partial, self.drafter)
            what = (f"its last round was cut ({cut.dropped_tokens} emitted token(s) and "
                    f"{len(cut.partial.restores)} restore(s) so far, nothing committed)"
                    if cut.partial is not None else "it had no round open")
            m.fire(Trigger.FAIL, error=f"the log ends inside task {cut.task} (slot {cut.slot}, "
                                       f"line {cut.line}): {what}", truncated=True)
            self.journal.end_unit()

    def start(self, task: LlamaTask, s: _Slot, prompt_ids: list[int] | None,
              resp: ResponseFacts | None) -> Generator[Step, None, _Turn]:
        """start_turn, the prompt phase and the prefill that samples the first token."""
        m = s.machine
        n_prompt = task.prompt_tokens or (resp.prompt_tokens if resp is not None else None)
        n_past = task.n_past if task.n_past is not None else (
            resp.cache_n if resp is not None else None)
        if prompt_ids is not None and len(prompt_ids) != n_prompt:
            prompt_ids = None  # tokenized otherwise than the server did: not this prompt
        prompt: list[int | None] = (list(prompt_ids) if prompt_ids is not None
                                    else [None] * (n_prompt or 0))
        turn = _Turn(TurnMetrics(slot=task.slot, turn=m.turn, prompt_tokens=n_prompt or 0),
                     prompt)
        kept = task.lcp.lcp if task.lcp is not None else (0 if s.length == 0 else None)
        if kept is not None and s.length is not None:
            f_keep: float | None = kept / s.length if s.length else 1.0
        else:
            f_keep = task.selection.f_keep if task.selection is not None else None
        turn.stats.kept_tokens = kept or 0
        turn.stats.f_keep = f_keep if f_keep is not None else 1.0
        turn.unknown |= {name for name, v in (("kept_tokens", kept), ("f_keep", f_keep),
                                               ("prompt_tokens", n_prompt)) if v is None}
        payload: dict[str, Any] = {"prompt_tokens": n_prompt, "kept": kept, "f_keep": f_keep,
                                   "task": task.task, "n_past": n_past}
        if task.selection is not None:
            payload["selected_by"] = task.selection.method
            if task.selection.f_keep is not None:
                payload["engine_f_keep"] = task.selection.f_keep
        if n_past is not None and n_prompt is not None:
            payload |= {"trim": n_past, "append": prompt[n_past:]}
            s.tokens = list(prompt)
        m.fire(Trigger.START_TURN, **payload)
        start, start_t = yield from self.prompt_phase(task, s, turn, kept)
        generated = task.generated or (resp.predicted_n if resp is not None else 0)
        timing = task.timings.get(TimingPhase.PROMPT)
        if n_prompt is not None and generated:
            first = task.first_token
            if first is not None:
                yield first.line, first.t
            tokens = n_prompt - start if start is not None else (timing.tokens if timing else 0)
            token = first.token if first is not None else None
            m.fire(Trigger.PREFILL, self.since(start_t), tokens=tokens, position=n_prompt,
                   append=[token])
            turn.stats.prefill_tokens += tokens
            s.tokens.append(token)
            s.position = n_prompt
        if timing is not None:
            turn.stats.prefill_s = timing.ms / 1e3
        return turn

    def prompt_phase(self, task: LlamaTask, s: _Slot, turn: _Turn, kept: int | None
                     ) -> Generator[Step, None, tuple[int | None, float | None]]:
        """ctx_restore, prefill batches and ctx_save in log order; returns (the last
        batch's start, its time)."""
        m = s.machine
        start: int | None = None
        start_t: float | None = None
        for r in task.prompt_phase:
            yield r.line, r.t
            if isinstance(r, Count) and r.kind is K.CACHED:
                if start is not None and r.n > start:
                    m.fire(Trigger.PREFILL, self.since(start_t), tokens=r.n - start,
                           position=r.n)
                    turn.stats.prefill_tokens += r.n - start
                start, start_t = r.n, r.t
            elif r.kind in (K.CTX_RESTORED, K.FULL_REPROCESS):
                self.ctx_restore(m, r, s, turn, kept)
            elif isinstance(r, Checkpoint) and r.kind is K.CTX_CREATED:
                m.fire(Trigger.CTX_SAVE, at=r.n_tokens, index=r.index, limit=r.limit,
                       bytes=round((r.size_mib or 0.0) * MIB))
        return start, start_t

    def ctx_restore(self, m: RoundMachine, r: Record, s: _Slot, turn: _Turn,
                    kept: int | None) -> None:
        """A context-checkpoint restore, or a full re-processing (a reset)."""
        ckpt = r if isinstance(r, Checkpoint) else None
        position = ckpt.n_past or 0 if ckpt is not None else 0
        payload: dict[str, Any] = {"position": position, "from_position": s.length,
                                   "reset": ckpt is None}
        if ckpt is not None:
            payload |= {"checkpoint": ckpt.n_tokens, "pos_min": ckpt.pos_min,
                        "pos_max": ckpt.pos_max, "bytes": round((ckpt.size_mib or 0.0) * MIB)}
        if kept is not None and s.length is not None:
            payload["reprefill"] = max(0, min(kept, s.length) - position)
            turn.stats.reprefill_tokens += payload["reprefill"]
        else:
            turn.unknown.add("reprefill_tokens")
        turn.stats.ctx_restores += 1
        m.fire(Trigger.CTX_RESTORE, **payload)

    def since(self, t: float | None) -> float:
        """Seconds from log time `t` to now (0 without timestamps)."""
        return max(0.0, self.now - t) if t is not None else 0.0

    def finish(self, task: LlamaTask, s: _Slot, turn: _Turn, resp: ResponseFacts | None
               ) -> None:
        """The turn's checks and end_turn."""
        assert task.released is not None
        m, stats = s.machine, turn.stats
        fold = RoundFold(tuple(turn.fold))
        evals = task.timings.get(TimingPhase.EVAL)
        found: list[Violation] = []
        if self.rounds_visible:
            emitted: list[int | None] = [task.first_token.token] if task.first_token else []
            for rnd in task.rounds:
                emitted.extend(rnd.tokens)
            transcript = [*turn.prompt, *emitted]
            stats.generated_tokens = len(emitted)
            stats.stray_tokens = max(0, len(s.tokens) - len(transcript))
            found += check_turn_end(s.tokens, transcript)
            if s.position != task.released.n_tokens:
                found.append(Violation(
                    Invariant.BOOKKEEPING, f"llama-server released the slot with "
                    f"{task.released.n_tokens} tokens, the imported turn leaves "
                    f"{s.position}", {"engine": task.released.n_tokens, "ledger": s.position}))
            found += totals_violations(fold, task.totals, task.acc_per_pos)
        else:
            stats.generated_tokens = evals.tokens if evals is not None else 0
            stats.drafted = task.totals.generated if task.totals is not None else 0
            stats.accepted = task.totals.accepted if task.totals is not None else 0
            # Without -v the log shows no round and no context checkpoint.
            turn.unknown |= {"stray_tokens", "rounds", "restores", "ctx_restores",
                             "reprefill_tokens", "reprefill_s"}
        if resp is not None:
            found += response_violations(
                resp, n_past=task.n_past, prompt=task.prompt_tokens,
                generated=stats.generated_tokens, drafted=stats.drafted,
                accepted=stats.accepted)
        for v in found:
            self.violate(m, turn, v)
        if evals is not None:
            stats.decode_s = evals.ms / 1e3
        if stats.prefill_tokens and stats.reprefill_tokens:
            stats.reprefill_s = stats.prefill_s * min(
                1.0, stats.reprefill_tokens / stats.prefill_tokens)
        metrics = stats.to_dict() | {k: None for k in turn.unknown} | {
            "unknown": sorted(turn.unknown), "task": task.task,
            "stop": task.stop.value if task.stop is not None else None}
        m.fire(Trigger.END_TURN, metrics=metrics)
        s.length = task.released.n_tokens
        self.turns.append(TurnMetrics.from_dict(metrics))


def record_log(reading: LogReading, journal: Sink, *,
               prompts: Sequence[list[int] | None] = (),
               responses: Sequence[ResponseFacts] = ()) -> LedgerResult:
    """Fire every task of `reading` into `journal`. `prompts[i]` are the token ids of the
    i-th task's prompt where the caller knows them (a run that tokenized its requests);
    `responses` are the client's answers, matched to tasks by shape and cross-checked."""
    fold = fold_tasks(reading.records)
    ledger = _Ledger(reading, journal)
    shapes = [(t.prompt_tokens, t.generated_logged) for t in fold.tasks]
    matched = match_responses(shapes, list(responses)) if responses else [None] * len(shapes)
    cuts = {c.task: c for c in fold.truncated}
    units = [ledger.task_units(t, prompts[i] if i < len(prompts) else None, matched[i],
                               cuts.get(t.task)) for i, t in enumerate(fold.tasks)]
    heap = [(step[0], i, step[1]) for i, g in enumerate(units)
            if (step := next(g, None)) is not None]
    heapq.heapify(heap)
    while heap:
        _, i, t = heapq.heappop(heap)
        ledger.set_time(t)
        step = next(units[i], None)
        if step is not None:
            heapq.heappush(heap, (step[0], i, step[1]))
    return LedgerResult(ledger.turns, fold, ledger.violations,
                        sum(r is not None for r in matched), ledger.events, fold.truncated)
