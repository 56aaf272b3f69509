"""vLLM's answers as a specledger session: each request is a turn of slot 0, fired through
the same round machine as our engine, with the same triggers and payload types
(fsm/payloads.py, docs/events.md), so the projection, the postmortem detectors, `show`
and `diff` read it as they read our own sessions.

A turn: `start_turn` (the prompt as vLLM tokenized it; the kept prefix: what it shares
with the slot's tokens, as llama.cpp's is), `ctx_restore` where the state resumes before
that prefix and history is processed again (from the prefix cache's hit, whole cached
blocks with their GDN state, `vllm:prefix_cache_hits`; or from nothing, `reset`, when the
cache is off), the `prefill` that samples the first token,
one round per engine step where the stream places them (adapters/vllm/steps.py), the
checks, and `end_turn` with the turn's metrics. A turn whose steps cannot be placed has
no round events: its metrics name `rounds` unknown and carry vLLM's own acceptance
figures instead. vLLM's counters are checked against each other (adapters/vllm/
crosscheck.py): a disagreement is an `invariant_violation`, never a correction. A run
that ended early (the server died) ends with `fail` after the turns it finished.
"""

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters.protocol import Sink, end_metrics
from adapters.vllm.answers import Answer
from adapters.vllm.crosscheck import answer_violations
from adapters.vllm.ledger_rounds import fire_step
from adapters.vllm.steps import Step, StepKind, place_steps
from engine.speculative import common_prefix
from fsm.invariants import Violation, check_turn_end
from fsm.machine import RoundMachine
from fsm.payloads import StartTurn
from fsm.states import Trigger
from fsm.turn_metrics import TurnMetrics

NOT_REPORTED = ("rollback_s", "repair_s")
"""Never in vLLM's answers: time spent rolling back and restoring state."""
ROUND_FIGURES = ("rounds", "restores", "stray_tokens")
"""What a turn without placed rounds cannot give."""


@dataclass(frozen=True)
class EngineFacts:
    """What the session's server was: our drafter name (None: plain), its draft size,
    whether prefix caching was on, and the model's end-of-generation ids."""

    drafter: str | None
    k: int
    prefix_caching: bool
    eog_ids: frozenset[int]


@dataclass
class VllmLedgerResult:
    """The recorded turns (metrics as recorded), violations recorded, events fired, and
    the turns whose rounds were placed."""

    turns: list[TurnMetrics] = field(default_factory=list)
    violations: int = 0
    events: int = 0
    placed: int = 0


class _Ledger:
    """One session's slot 0 being recorded: its machine, its tokens, the result so far."""

    def __init__(self, journal: Sink, facts: EngineFacts, t0: float) -> None:
        self.journal = journal
        self.facts = facts
        self.t0 = t0
        self.now = 0.0
        self.result = VllmLedgerResult()
        seq = itertools.count(1)
        self.m = RoundMachine(0, self, seq.__next__, lambda: self.now)
        self.tokens: list[int | None] = []

    def append(self, event: Any) -> None:
        """The machine's sink: count, then pass on."""
        self.result.events += 1
        self.journal.append(event)

    def at(self, t: float | None) -> None:
        """Stamp the next events with wall time `t` (kept when unknown)."""
        if t is not None:
            self.now = max(self.now, t - self.t0)

    def violate(self, stats: TurnMetrics, v: Violation) -> None:
        """Record one violation."""
        self.result.violations += 1
        stats.violations += 1
        self.m.fire(Trigger.INVARIANT_VIOLATION, 0.0, v.to_payload())

    def turn(self, a: Answer, rec: dict[str, Any]) -> None:
        """Fire one answer's turn."""
        stats, unknown, prompt = self.start(a, rec)
        answer = a.tokens
        steps = self.steps(a)
        reported: dict[str, Any] = {}
        if steps is not None:
            self.result.placed += 1
            self.rounds(stats, steps, answer)
        else:
            self.tokens.extend(answer[1:])
            unknown |= set(ROUND_FIGURES)
            reported["answer_ids"] = list(answer)
            if a.spec is not None:
                stats.drafted, stats.accepted = a.spec.drafted, a.spec.accepted
                reported["mean_accept_len"] = a.spec.mean_acceptance_length
                if a.counters is not None and a.counters.per_pos is not None and a.spec.steps:
                    reported["acc_per_pos"] = [n / a.spec.steps for n in a.counters.per_pos]
        self.finish(a, rec, stats, unknown, reported, prompt, steps is not None)

    def start(self, a: Answer, rec: dict[str, Any]
              ) -> tuple[TurnMetrics, set[str], list[int | None]]:
        """Fire a turn's start: `start_turn`, the history prefilled again, the prefill that
        samples the first token. Returns its metrics so far, what of them is unknown, and
        the prompt."""
        m, facts = self.m, self.facts
        m.turn, m.round = a.index + 1, 0
        self.at(rec.get("started"))
        prompt: list[int | None] = (list(a.prompt_ids) if a.prompt_ids is not None
                                    else [None] * (a.prompt_tokens or 0))
        previous = len(self.tokens)
        kept = common_prefix(prompt, self.tokens) if None not in prompt else None
        # Where the state resumes: the prefix cache's hit (whole cached blocks, their GDN
        # state saved with them), or nothing when the cache is off.
        reused = (0 if not facts.prefix_caching else
                  a.counters.prefix_hits if a.counters is not None else None)
        stats = TurnMetrics(slot=0, turn=m.turn, prompt_tokens=len(prompt),
                            kept_tokens=kept or 0)
        unknown = set(NOT_REPORTED)
        f_keep = (kept / previous if previous else 1.0) if kept is not None else None
        stats.f_keep = f_keep if f_keep is not None else 1.0
        start: StartTurn = {"prompt_tokens": len(prompt), "kept": kept, "f_keep": f_keep,
                            "trim": kept or 0, "append": prompt[kept or 0:]}
        m.fire(Trigger.START_TURN, 0.0, start)
        if kept is None or reused is None:
            unknown |= {"kept_tokens", "f_keep", "reprefill_tokens", "reprefill_s"}
        elif kept > reused:
            stats.reprefill_tokens = kept - reused
            stats.ctx_restores = 1
            m.fire(Trigger.CTX_RESTORE, 0.0, {"position": reused,
                                              "from_position": previous - 1,
                                              "reset": reused == 0,
                                              "reprefill": kept - reused})
        self.tokens = list(prompt)
        answer = a.tokens
        stats.generated_tokens = len(answer)
        stats.prefill_tokens = len(prompt) - (reused or 0)
        stats.prefill_s = a.ttft_s or 0.0
        stats.decode_s = a.decode_s or 0.0
        unknown |= {name for name, v in (("prefill_s", a.ttft_s), ("decode_s", a.decode_s))
                    if v is None}
        if answer:
            started = rec.get("started")
            self.at(started + (a.ttft_s or 0.0) if started is not None else None)
            m.fire(Trigger.PREFILL, a.ttft_s or 0.0, {"tokens": stats.prefill_tokens,
                                                      "position": len(prompt),
                                                      "append": [answer[0]]})
            self.tokens.append(answer[0])
        self.journal.end_unit()
        return stats, unknown, prompt

    def steps(self, a: Answer) -> list[Step] | None:
        """The answer's engine steps, where the stream places them."""
        if a.spec is None:
            if self.facts.drafter is not None:
                return None  # a speculative server that did not report the request's steps
            return place_steps([len(c) for c in a.chunks], (), ())
        if a.spec.per_step_drafted is None or a.spec.per_step_accepted is None:
            return None
        return place_steps([len(c) for c in a.chunks], a.spec.per_step_drafted,
                           a.spec.per_step_accepted)

    def rounds(self, stats: TurnMetrics, steps: Sequence[Step], answer: list[int]) -> None:
        """Fire the decode steps' rounds."""
        m = self.m
        position = len(self.tokens) - 1
        decode = steps[1:]
        for i, step in enumerate(decode):
            m.round += 1
            block = answer[step.start:step.start + step.emitted]
            position = fire_step(m, step, block, position, self.facts.drafter,
                                 self.facts.eog_ids)
            self.tokens.extend(block)
            stats.rounds += 1
            stats.drafted += step.drafted
            stats.accepted += step.accepted
            stats.restores += int(step.kind is StepKind.VERIFY and (
                step.accepted < step.drafted or step.cut > 0))
            if i < len(decode) - 1:
                m.fire(Trigger.NEXT)
            self.journal.end_unit()

    def finish(self, a: Answer, rec: dict[str, Any], stats: TurnMetrics, unknown: set[str],
               reported: dict[str, Any], prompt: list[int | None], placed: bool) -> None:
        """The turn's checks and end_turn."""
        self.at(rec.get("ended"))
        stop = a.finish_reason if a.finish_reason not in (None, "stop") else None
        found = list(answer_violations(a, self.facts.k))
        if placed and None not in prompt:
            found = check_turn_end(self.tokens, [*prompt, *a.tokens], stop) + found
        for v in found:
            self.violate(stats, v)
        metrics = end_metrics(stats, unknown, stop=a.finish_reason, **reported)
        self.m.fire(Trigger.END_TURN, 0.0, {"metrics": metrics})
        self.result.turns.append(TurnMetrics.from_dict(metrics))
        self.journal.end_unit()


def record_answers(answers: Sequence[Answer], records: Sequence[dict[str, Any]],
                   journal: Sink, facts: EngineFacts, failure: str | None = None
                   ) -> VllmLedgerResult:
    """Fire every answer's turn into `journal` (`records[i]`: the i-th answer's exchange
    record, for its wall times); a `failure` ends the session with `fail` on the turn it
    interrupted (the last answer, when it has an `error`: what arrived of it is recorded
    up to its first token)."""
    starts = [r["started"] for r in records if "started" in r]
    ledger = _Ledger(journal, facts, min(starts) if starts else 0.0)
    for a, rec in zip(answers, records, strict=True):
        if a.error is None:
            ledger.turn(a, rec)
        else:  # the turn the server did not finish: its start, as far as it came
            ledger.start(a, rec)
    if failure is not None:
        ledger.m.turn = len(answers) + (0 if answers and answers[-1].error else 1)
        ledger.m.round = 0
        ledger.m.fire(Trigger.FAIL, 0.0, {"error": failure})
        ledger.journal.end_unit()
    return ledger.result
