"""One speculative round as a state transaction:
checkpoint -> speculate -> verify -> accept | reject -> restore -> replay -> commit.

Every step fires one transition of the slot's `RoundMachine` (and so writes one event);
the rollback strategy (engine/strategies/) decides what the verify keeps and how the
round settles. Each payload is its trigger's type in fsm/payloads.py (docs/events.md).

A round is three plain calls around the target's verify, so that one body serves both
schedules (docs/design.md#batched-schedule): `prepare` checkpoints and drafts and returns
the `Round` whose `batch` asks for a verify; `record` fires the verify event with its
answer; `settle` accepts or rolls back and commits, or returns None when a `reverify`
retry asks for another verify. `run_round` answers each verify at once with the
backend's own forward; the batched scheduler (engine/scheduler.py) answers every slot's
in one forward, and records them all before any slot settles.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.backend import VerifyOut
from engine.drafters.base import ChainDrafter, Drafter
from engine.services import Services
from engine.slot import Slot
from engine.speculative import Block, accepted_block
from engine.strategies import Round
from fsm.errors import InvariantViolationError
from fsm.invariants import CommitFacts, Violation, check_commit
from fsm.machine import RoundMachine
from fsm.states import Trigger


@dataclass(frozen=True)
class Verified:
    """A verify's answer: the row's output, the forward's time on the backend clock, and
    the payload fields of the forward the row shared (`batch_id`, `batch_slots`,
    `batch_tokens`; none under the sequential schedule)."""

    out: VerifyOut
    duration: float
    shared: Mapping[str, int] = field(default_factory=dict)


def run_round(e: Services, s: Slot, budget: int | None = None) -> Block:
    """Run one round on slot `s`, each verify its own forward, and return what it
    committed. `budget` is how many tokens the answer may still take: drafts never reach
    past it, so a speculative turn ends exactly where a plain one does."""
    b = e.backend
    r = prepare(e, s, budget)
    while True:
        t = b.now()
        out = b.verify(r.state, r.batch, r.keep)
        record(r, Verified(out, b.now() - t))
        block = settle(e, r)
        if block is not None:
            return block


def prepare(e: Services, s: Slot, budget: int | None = None) -> Round:
    """Open a round on `s`: checkpoint and draft (at most `budget - 1` tokens, see
    `run_round`); the returned round's `batch` is what to verify."""
    w, b, cfg = e.work[s.id], e.backend, e.config
    m, drafter = w.machine, w.drafter
    m.round += 1
    k_max = cfg.draft_max if budget is None else min(cfg.draft_max, budget - 1)
    if drafter is None or k_max < 1:
        return _plain(e, s)
    strategy = e.strategy
    pos0 = s.state.position
    t = b.now()
    saved = strategy.save(b, s.state)
    begin = {"strategy": strategy.name, "position": pos0,
             "bytes": b.state_bytes() if saved is not None else 0}
    if saved is not None and b.capabilities.checkpoint_tensors:
        begin["tensors"] = b.capabilities.checkpoint_tensors
    m.fire(Trigger.BEGIN, b.now() - t, begin)
    t = b.now()
    drafts = drafter.propose(b, s.state, s.tokens, k_max)
    stats = drafter.stats()
    m.fire(Trigger.DRAFT, b.now() - t, {"drafts": drafts, "drafter": drafter.name, **stats})
    if not drafts:
        return _plain(e, s)
    return Round(s, w, b, cfg, strategy, [s.tokens[-1], *drafts], Trigger.VERIFY, pos0, saved,
                 _draft_state(drafter, stats, len(s.tokens) - 1 + len(drafts)))


def _plain(e: Services, s: Slot) -> Round:
    """A non-speculative step: verify only the last committed token."""
    return Round(s, e.work[s.id], e.backend, e.config, e.strategy, [s.tokens[-1]],
                 Trigger.DECODE, s.state.position)


def record(r: Round, res: Verified) -> None:
    """Take the verify's answer and fire its event."""
    r.out, n = res.out, len(r.batch)
    payload: dict[str, Any] = {"targets": r.out.targets, "drafted": 0, "batch": n}
    if r.trigger is not Trigger.DECODE:
        payload = {"drafts": r.drafts, "targets": r.out.targets, "batch": n}
        if r.trigger is Trigger.VERIFY:
            payload["drafted"] = n - 1
    r.work.machine.fire(r.trigger, res.duration, {**payload, **res.shared})


def settle(e: Services, r: Round) -> Block | None:
    """Judge the recorded verify: accept every draft or roll back to the accepted
    boundary, then commit; None when the strategy asks to verify again (the round's
    next verify is a RETRY)."""
    s, m, b, drafts = r.slot, r.work.machine, e.backend, r.drafts
    block = accepted_block(drafts, r.verified.targets, b.template.eog_ids,
                           e.config.eog_policy)
    if block.consumed == len(r.batch):
        m.fire(Trigger.ACCEPT, 0.0, {"matched": block.accepted, "eog": block.eog})
        t = b.now()
        if drafts:
            r.strategy.accept(r)
    else:
        m.fire(Trigger.REJECT, 0.0, {"matched": block.accepted, "eog": block.eog,
                                     "cut": block.cut})
        if not r.strategy.roll_back(r, block):
            r.trigger = Trigger.RETRY
            return None
        t = b.now()
    commit(e, s, block, t, r.draft_facts)
    if drafts and r.work.drafter is not None:
        r.work.drafter.on_commit(len(drafts), block.accepted)
    return block


def _draft_state(drafter: Drafter, stats: dict[str, int], expected: int
                 ) -> tuple[int | None, int | None]:
    """Invariant 6's facts after drafting: the draft state's position as its drafter
    reports it, and where it belongs (`expected`: the slot's tokens but the last, then
    the last and the drafter's own drafts but the last, each draft fed back to draft the
    next). In a chain the member that drafted reports (the chain's merged numbers would
    not say whose state drafted); unknown (None) for a drafter without a state."""
    if isinstance(drafter, ChainDrafter):
        stats = drafter.used.stats() if drafter.used is not None else {}
    position = stats.get("draft_position")
    if position is None:
        return None, None
    return position, expected


def commit(e: Services, s: Slot, block: Block, t: float,
           draft: tuple[int | None, int | None] = (None, None)) -> Block:
    """Commit `block` (the state is already at its boundary) and check the invariants.
    `t` is when the commit work began on the backend's clock; `draft` is invariant 6's
    (draft state position, where it belongs), from `_draft_state`."""
    w, b, cfg = e.work[s.id], e.backend, e.config
    m = w.machine
    s.tokens.extend(block.tokens)
    position = s.state.position
    digest = b.digest(s.state)
    audit = b.audit(s.state, s.tokens) if cfg.audit else None
    m.fire(Trigger.COMMIT, b.now() - t, {"append": block.tokens, "position": position,
           "digest": digest, "accepted": block.accepted, "cut": block.cut})
    w.guard.note_progress()
    facts = CommitFacts(
        committed=len(block.tokens),
        n_tokens=len(s.tokens),
        position=position,
        kv_len=b.kv_length(s.state),
        digest=digest,
        audit=audit,
        ctx_positions=[c.position for c in s.ring],
        draft_position=draft[0],
        draft_expected_position=draft[1],
    )
    record_violations(e, m, check_commit(facts))
    return block


def record_violations(e: Services, m: RoundMachine, violations: Iterable[Violation]) -> None:
    """Fire each violation's event; under `strict` the first one also stops the run."""
    for v in violations:
        m.fire(Trigger.INVARIANT_VIOLATION, 0.0, v.to_payload())
        if e.config.strict:
            raise InvariantViolationError(f"{v.invariant}: {v.message}")
