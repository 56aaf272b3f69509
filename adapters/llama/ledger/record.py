"""A llama-server log as a specledger session: each task (request) is a turn of its slot,
fired through the same round machine as our engine, with the same triggers and payload
types (fsm/payloads.py, docs/events.md; engine/turn.py, engine/round.py), so the
projection, the postmortem detectors and `show` read it as they read our own sessions.

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters.llama.ledger.crosscheck import (
    response_violations,
    totals_violations,
    verdict_violations,
)
from adapters.llama.ledger.fold import fold_tasks
from adapters.llama.ledger.prompt import SlotState, TurnState, start_steps
from adapters.llama.ledger.provenance import shows_prompt_phase
from adapters.llama.ledger.responses import ResponseFacts, match_responses
from adapters.llama.ledger.rounds import Step, partial_steps, round_steps
from adapters.llama.ledger.tasks import CutReason, LlamaTask, TaskFold, Truncation
from adapters.llama.log.reader import LogReading
from adapters.llama.log.records import RecordKind, StopReason, TimingPhase
from adapters.llama.log.run import RunEnd
from adapters.protocol import Sink, end_metrics
from eventlog.turn_fold import TurnsFold
from fsm.event import Event
from fsm.invariants import Invariant, Violation, check_turn_end
from fsm.machine import RoundMachine
from fsm.payloads import Fail
from fsm.states import Trigger
from fsm.turn_metrics import TurnMetrics

K = RecordKind


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


class TaskLedger:
    """The round machines of a log's slots and what each has been fed, task by task
    (`record_log` drives one over a whole log, `specledger watch` over a live one)."""

    def __init__(self, reading: LogReading, journal: Sink, draft_reuse_logged: bool) -> None:
        self.server = reading.server
        self.journal = journal
        self.rounds_visible = any(r.kind in (K.DRAFT, K.DECODE, K.TOKEN)
                                  for r in reading.records)
        self.ending = reading.ending
        self.server_logs_checkpoints = shows_prompt_phase(reading)
        self.draft_reuse_logged = draft_reuse_logged
        self.now = 0.0
        self.events = 0
        self.violations = 0
        self._seq = itertools.count(1)
        self.slots: dict[int, SlotState] = {}
        self.turns: list[TurnMetrics] = []
        # A turn's rounds, drafts and violations are the one fold's, as the engine's are.
        self._fold = TurnsFold(lambda _: None)

    def append(self, event: Event) -> None:
        """The machines' sink: count and fold, then pass on."""
        self.events += 1
        self._fold.apply(event)
        self.journal.append(event)

    def clock(self) -> float:
        """The log time events are stamped with now."""
        return self.now

    def set_time(self, t: float | None) -> None:
        """Stamp the next events with log time `t` (kept when the line had none)."""
        if t is not None:
            self.now = t

    def slot(self, n: int) -> SlotState:
        """Slot `n`, made on first use."""
        s = self.slots.get(n)
        if s is None:
            # A log that shows the server starting shows every slot empty at first.
            empty = 0 if self.server.n_slots is not None else None
            machine = RoundMachine(n, self, self._seq.__next__, self.clock)
            s = self.slots[n] = SlotState(machine, empty)
        return s

    def violate(self, m: RoundMachine, v: Violation) -> None:
        """Record one violation."""
        self.violations += 1
        m.fire(Trigger.INVARIANT_VIOLATION, 0.0, v.to_payload())

    def task_units(self, task: LlamaTask, prompt_ids: list[int] | None,
                   resp: ResponseFacts | None, cut: Truncation | None) -> Iterator[Step]:
        """Fire one task's events; before each group of them, yield the log line and
        time it happened at (the driver interleaves the slots by line)."""
        yield task.first_line, task.t
        s = self.slot(task.slot)
        m = s.machine
        m.turn += 1
        m.round = 0
        turn = yield from start_steps(s, task, prompt_ids, resp, self.clock, self.server.n_swa)
        self.journal.end_unit()
        for i, rnd in enumerate(task.rounds):
            if not rnd.complete:
                yield rnd.first_line, rnd.t
                self.violate(m, Violation(
                    Invariant.BOOKKEEPING, f"the round at log line {rnd.first_line} never "
                    f"completed", {"line": rnd.first_line}))
                continue
            m.round += 1
            s.draft_recomputed += rnd.draft_recomputed
            res = yield from round_steps(m, rnd, self.server.spec_types,
                                         self.server.n_rs_seq, s.draft_recomputed
                                         if self.draft_reuse_logged else None)
            s.tokens.extend(res.block)
            s.position = res.position
            if rnd.done is not None and rnd.done.n_tokens != res.position:
                self.violate(m, Violation(
                    Invariant.BOOKKEEPING, f"llama-server's slot holds {rnd.done.n_tokens} "
                    f"tokens after the round, the imported commits {res.position}",
                    {"engine": rnd.done.n_tokens, "ledger": res.position}))
            for v in verdict_violations(rnd):
                self.violate(m, v)
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
                yield from partial_steps(m, cut.partial, self.server.spec_types)
            m.fire(Trigger.FAIL, 0.0, self.cut_payload(cut))
            s.length = None  # what the slot holds after a request the log lost is unknown
            self.journal.end_unit()

    def cut_payload(self, cut: Truncation) -> Fail:
        """The fail event of a task whose end the log does not show."""
        what = (f"its last round was cut ({cut.dropped_tokens} emitted token(s) and "
                f"{len(cut.partial.restores)} restore(s) so far, nothing committed)"
                if cut.partial is not None else "it had no round open")
        where = f"task {cut.task} (slot {cut.slot}, line {cut.line})"
        if cut.why is CutReason.SLOT_REUSED:
            why, head = CutReason.SLOT_REUSED.value, (
                f"the log shows slot {cut.slot} take another task before the end of {where}")
        elif self.ending is RunEnd.DIED:
            why, head = "server_died", (f"the server died inside {where}: its run ends "
                                        "without its shutdown lines")
        else:
            why, head = CutReason.LOG_ENDS.value, f"the log ends inside {where}"
        return {"error": f"{head}: {what}", "truncated": True, "cut": why}

    def finish(self, task: LlamaTask, s: SlotState, turn: TurnState,
               resp: ResponseFacts | None) -> None:
        """The turn's checks and end_turn."""
        assert task.released is not None
        m, stats = s.machine, turn.stats
        counted = self._fold.counts(task.slot)
        stats.rounds, stats.drafted = counted.rounds, counted.drafted
        stats.accepted, stats.restores = counted.accepted, counted.restores
        evals = task.timings.get(TimingPhase.EVAL)
        found: list[Violation] = []
        reported: dict[str, Any] = {}
        if self.rounds_visible and not task.head_cut:
            emitted: list[int | None] = [task.first_token.token] if task.first_token else []
            for rnd in task.rounds:
                emitted.extend(rnd.tokens)
            transcript = [*turn.prompt, *emitted]
            stats.generated_tokens = len(emitted)
            stats.stray_tokens = max(0, len(s.tokens) - len(transcript))
            # A length stop inside a verified block (0.3.21 keeps the whole block) is not
            # #28049's EOG: the violation names the stop, the postmortem tells them apart.
            stop = None if task.stop in (None, StopReason.EOS) else task.stop.value
            found += check_turn_end(s.tokens, transcript, stop)
            if s.position != task.released.n_tokens:
                found.append(Violation(
                    Invariant.BOOKKEEPING, f"llama-server released the slot with "
                    f"{task.released.n_tokens} tokens, the imported turn leaves "
                    f"{s.position}", {"engine": task.released.n_tokens, "ledger": s.position}))
            found += totals_violations(self._fold.records[(task.slot, m.turn)].profile,
                                       task.totals, task.acc_per_pos)
        else:
            # Without -v the log shows no round; a piece that begins inside the task shows
            # only its last ones. The engine's own totals cover the task, where printed.
            stats.generated_tokens = evals.tokens if evals is not None else 0
            stats.drafted = task.totals.generated if task.totals is not None else 0
            stats.accepted = task.totals.accepted if task.totals is not None else 0
            turn.unknown |= {"stray_tokens", "rounds", "restores"}
            if task.head_cut or not self.server_logs_checkpoints:
                turn.unknown |= {"ctx_restores", "reprefill_tokens", "reprefill_s"}
            if task.head_cut:
                turn.unknown |= {"prefill_tokens", "prefill_s"}
                turn.unknown |= {name for name, known in (
                    ("generated_tokens", evals), ("drafted", task.totals),
                    ("accepted", task.totals)) if known is None}
            if task.totals is not None:  # the engine's own figures, as it prints them
                reported["mean_accept_len"] = task.totals.mean_len
            if task.acc_per_pos is not None:
                reported["acc_per_pos"] = list(task.acc_per_pos.rates)
        if resp is not None:
            found += response_violations(
                resp, n_past=task.n_past, prompt=task.prompt_tokens,
                generated=stats.generated_tokens, drafted=stats.drafted,
                accepted=stats.accepted, stop=task.stop)
        for v in found:
            self.violate(m, v)
        stats.violations = counted.violations
        if evals is not None:
            stats.decode_s = evals.ms / 1e3
        if task.error is not None:
            reported["error"] = task.error
        metrics = end_metrics(stats, turn.unknown, task=task.task, stop=task.stop.value
                              if task.stop is not None else None, **reported)
        m.fire(Trigger.END_TURN, 0.0, {"metrics": metrics})
        s.length = task.released.n_tokens
        self.turns.append(TurnMetrics.from_dict(metrics))


def response_shape(task: LlamaTask) -> tuple[int | None, int | None]:
    """What an answer must show to be the task's (`match_responses`' shape): the prompt
    tokens and the tokens generated, None where the log does not say."""
    return task.prompt_tokens, task.generated_logged


def record_log(reading: LogReading, journal: Sink, *,
               prompts: Sequence[list[int] | None] = (),
               responses: Sequence[ResponseFacts] = ()) -> LedgerResult:
    """Fire every task of `reading` into `journal`. `prompts[i]` are the token ids of the
    i-th task's prompt where the caller knows them (a run that tokenized its requests);
    `responses` are the client's answers, matched to tasks by shape and cross-checked."""
    fold = fold_tasks(reading.records)
    ledger = TaskLedger(reading, journal, fold.draft_reuse_logged)
    shapes = [response_shape(t) for t in fold.tasks]
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

