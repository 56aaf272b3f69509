"""One turn of a conversation in a slot: reuse the prefix, prefill, run rounds to EOG,
check the slot against the transcript. Payloads: fsm/payloads.py (docs/events.md)."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.progress import Progress
from engine.round import record_violations, run_round
from engine.services import Services
from engine.slot import CtxCheckpoint, Slot, plan_reuse
from engine.speculative import Block, visible_answer
from fsm.invariants import check_turn_end
from fsm.machine import RoundMachine
from fsm.payloads import Prefill
from fsm.states import Trigger
from fsm.turn_metrics import TurnMetrics


def run_turn(
    e: Services,
    s: Slot,
    question: Sequence[int],
    end_unit: Callable[[], None],
    progress: Progress | None = None,
) -> TurnMetrics:
    """Run one request/answer turn on slot `s`. `end_unit` is called after every whole
    unit of events (a prefill, a round), where the journal may write."""
    turn = open_turn(e, s, question, progress)
    end_unit()
    while (budget := turn.budget(e)) is not None:
        block = run_round(e, s, budget)
        if not turn.close_round(block, progress):
            break
        end_unit()
    return end_turn(e, turn, end_unit)


@dataclass
class OpenTurn:
    """A turn between its prefill and its end: the slot, the machine its events go
    through, its prompt, and where the answer begins in the slot's tokens."""

    slot: Slot
    machine: RoundMachine
    prompt: list[int]
    answer_start: int

    def budget(self, e: Services) -> int | None:
        """Tokens the answer may still take, or None when the turn is over (the last
        token is an EOG, or the answer reached the cap)."""
        s = self.slot
        if s.tokens[-1] in e.backend.template.eog_ids:
            return None
        left = e.config.answer_cap - (len(s.tokens) - self.answer_start)
        return left if left > 0 else None

    def close_round(self, block: Block, progress: Progress | None) -> bool:
        """Close a committed round: False when it ended the answer, else the next round
        is announced (NEXT)."""
        if progress is not None:
            progress.tokens(len(block.tokens))
        if block.eog is not None:
            return False
        self.machine.fire(Trigger.NEXT)
        return True


def open_turn(e: Services, s: Slot, question: Sequence[int],
              progress: Progress | None = None) -> OpenTurn:
    """Start a turn (`start_turn`) and report the answer's first token."""
    prompt = start_turn(e, s, question)
    answer_start = len(prompt)
    if progress is not None:  # the prefill committed the answer's first token
        progress.tokens(len(s.tokens) - answer_start)
    return OpenTurn(s, e.work[s.id].machine, prompt, answer_start)


def start_turn(e: Services, s: Slot, question: Sequence[int]) -> list[int]:
    """Open a turn: reuse what the slot can, repair the recurrent state if it must,
    prefill the rest and commit the first answer token. Returns the prompt."""
    w, b = e.work[s.id], e.backend
    m = w.machine
    m.turn += 1
    m.round = 0
    prompt = b.template.next_prompt(s.transcript, question)
    slot_len = len(s.tokens)
    plan = plan_reuse(s.tokens, s.state.position, s.ring, prompt)
    s.tokens = list(prompt)
    m.fire(Trigger.START_TURN, 0.0, {"trim": plan.kept, "append": prompt[plan.kept:],
           "prompt_tokens": len(prompt), "kept": plan.kept,
           "f_keep": plan.kept / slot_len if slot_len else 1.0})
    s.drop_ctx_beyond(min(plan.kept, len(prompt) - 1))
    if w.drafter is not None:
        w.drafter.new_request()
    if plan.restore is not None or plan.reset:
        _repair(e, s, plan.restore, plan.reprefill)
    _prefill(e, s, prompt, plan.start)
    return prompt


def _repair(e: Services, s: Slot, ckpt: CtxCheckpoint | None, reprefill: int) -> None:
    """Bring the recurrent state back to a context checkpoint (or to nothing)."""
    m, b = e.work[s.id].machine, e.backend
    old = s.state.position
    t = b.now()
    if ckpt is None:
        b.reset(s.state)
    else:
        b.restore(s.state, ckpt.snap)
    m.fire(Trigger.CTX_RESTORE, b.now() - t, {
        "position": s.state.position, "digest": b.digest(s.state), "reprefill": reprefill,
        "from_position": old, "reset": ckpt is None})


def _prefill(e: Services, s: Slot, prompt: Sequence[int], start: int) -> None:
    """Process prompt[start:], saving context checkpoints every `ctx_checkpoint_every`
    tokens and before the generation header, then commit the first answer token.

    The first `reprefill` tokens processed are history seen before; the fold counts their
    share of each chunk's time as the turn's repeated prefill (`reprefill_s`). Splitting
    chunks there instead would add events and change recorded sessions."""
    m, b, cfg = e.work[s.id].machine, e.backend, e.config
    end = len(prompt)
    header_at = end - len(b.template.header)
    stops = {*range(cfg.ctx_checkpoint_every, end, cfg.ctx_checkpoint_every), header_at}
    cuts = [*sorted(p for p in stops if start < p < end), end]
    pos = start
    for cut in cuts:
        t = b.now()
        first = b.prefill(s.state, prompt[pos:cut])
        chunk: Prefill = {"tokens": cut - pos, "position": cut, "digest": b.digest(s.state)}
        if cut == end:
            chunk["append"] = [first]
        m.fire(Trigger.PREFILL, b.now() - t, chunk)
        if cut < end and cfg.ctx_checkpoints:
            t = b.now()
            s.save_ctx(b.snapshot(s.state), cfg.ctx_checkpoints)
            m.fire(Trigger.CTX_SAVE, b.now() - t, {"at": cut, "bytes": b.state_bytes()})
        pos = cut
    s.tokens.append(first)


def end_turn(e: Services, turn: OpenTurn, end_unit: Callable[[], None]) -> TurnMetrics:
    """Close the turn: the transcript, the slot checked against what the user saw
    (invariant 1), END_TURN with the turn's metrics (folded from its events)."""
    s, prompt, answer_start = turn.slot, turn.prompt, turn.answer_start
    m = e.work[s.id].machine
    answer = visible_answer(s.tokens[answer_start:], e.backend.template.eog_ids)
    s.transcript = [*prompt, *answer]
    record_violations(e, m, check_turn_end(s.tokens, s.transcript))
    metrics = e.metrics.metrics(s.id)
    m.fire(Trigger.END_TURN, 0.0, {"metrics": metrics.to_dict()})
    end_unit()
    return metrics
