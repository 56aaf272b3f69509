"""One speculative round as a state transaction:
checkpoint -> speculate -> verify -> accept | reject -> restore -> replay -> commit.

Every step fires one transition of the slot's `RoundMachine` (and so writes one event);
the rollback strategy decides which steps do work. Replay is reconstruction unless the
`reverify` policy is chosen, which verifies again and can livelock when numerics depend
on the batch shape (llama.cpp #28060); the progress guard ends that and records it.
Each payload is its trigger's type in fsm/payloads.py (docs/events.md).

A round is a generator of its verify requests (`round_steps`), so that one body serves
both schedules (docs/design.md#batched-schedule): `run_round` verifies each request at
once with the backend's own forward; the batched scheduler (engine/scheduler.py) puts
every slot's request of a step into one forward. The protocol: the round yields a
`VerifyRequest`; the driver sends back a `Verified`; the round fires the verify event and
yields None (every row of a shared forward records its verify before any slot moves on);
the driver sends None; the round goes on to its next request (a `reverify` retry) or
returns its committed `Block`.
"""

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.backend import Backend, Keep, SeqState, VerifyOut
from engine.config import ReplayPolicy, Strategy
from engine.drafters.base import ChainDrafter
from engine.slot import Slot
from engine.speculative import Block, accepted_block
from fsm.errors import InvariantViolationError
from fsm.invariants import CommitFacts, check_commit
from fsm.states import Trigger

LIVELOCK_CYCLE = ["verify", "reject", "restore", "replay", "restore", "retry"]
_KEEP = {Strategy.CHECKPOINT: Keep.NOTHING, Strategy.NONE: Keep.NOTHING,
         Strategy.PER_TOKEN: Keep.PER_TOKEN, Strategy.INPUT_REPLAY: Keep.INPUTS}


@dataclass(frozen=True)
class VerifyRequest:
    """What a round asks the target: one forward over `batch` from `state`'s position,
    keeping what `keep` says."""

    state: SeqState
    batch: list[int]
    keep: Keep


@dataclass(frozen=True)
class Verified:
    """A request's answer: the row's output, the forward's time on the backend clock, and
    the payload fields of the forward the row shared (`batch_id`, `batch_slots`,
    `batch_tokens`; none under the sequential schedule)."""

    out: VerifyOut
    duration: float
    shared: Mapping[str, int] = field(default_factory=dict)


RoundSteps = Generator[VerifyRequest | None, Verified | None, Block]
"""A round in progress (see the module docstring for the protocol)."""


def run_round(s: Slot, budget: int | None = None) -> Block:
    """Run one round on slot `s`, each verify its own forward, and return what it
    committed. `budget` is how many tokens the answer may still take: drafts never reach
    past it, so a speculative turn ends exactly where a plain one does."""
    return drive(round_steps(s, budget), s.backend)


def drive(steps: RoundSteps, b: Backend) -> Block:
    """Run a round's steps to its commit, verifying every request with `b.verify` at once."""
    try:
        request = next(steps)
        while request is not None:
            t = b.now()
            out = b.verify(request.state, request.batch, request.keep)
            steps.send(Verified(out, b.now() - t))
            request = steps.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("a round yielded None where it must ask for a verify")


def _answer(res: Verified | None) -> Verified:
    """The driver's answer to a verify request (the protocol sends one)."""
    if res is None:
        raise RuntimeError("a round's verify request was answered with nothing")
    return res


def round_steps(s: Slot, budget: int | None = None) -> RoundSteps:
    """One round on slot `s` as its verify requests (`run_round` says what it does)."""
    m, b, cfg = s.machine, s.backend, s.config
    m.round += 1
    s.stats.rounds += 1
    k_max = cfg.draft_max if budget is None else min(cfg.draft_max, budget - 1)
    if s.drafter is None or k_max < 1:
        return (yield from _plain_steps(s))
    strategy = cfg.strategy
    pos0 = s.state.position
    t = b.now()
    snap = b.snapshot(s.state) if strategy is Strategy.CHECKPOINT else None
    m.fire(Trigger.BEGIN, b.now() - t, {"strategy": strategy.value, "position": pos0,
                                         "bytes": b.state_bytes() if snap is not None else 0})
    t = b.now()
    drafts = s.drafter.propose(b, s.state, s.tokens, k_max)
    stats = s.drafter.stats()
    m.fire(Trigger.DRAFT, b.now() - t, {"drafts": drafts, "drafter": s.drafter.name, **stats})
    if not drafts:
        return (yield from _plain_steps(s))
    batch = [s.tokens[-1], *drafts]
    k = len(drafts)
    draft = _draft_state(s, stats, k)
    trigger = Trigger.VERIFY
    while True:
        res = _answer((yield VerifyRequest(s.state, batch, _KEEP[strategy])))
        out = res.out
        verified: dict[str, Any] = {"drafts": drafts, "targets": out.targets, "batch": k + 1}
        if trigger is Trigger.VERIFY:
            verified["drafted"] = k
        verified.update(res.shared)
        m.fire(trigger, res.duration, verified)
        yield None
        block = accepted_block(drafts, out.targets, b.template.eog_ids, cfg.eog_policy)
        if block.consumed == k + 1:
            m.fire(Trigger.ACCEPT, 0.0, {"matched": block.accepted, "eog": block.eog})
            t = b.now()
            if strategy is Strategy.INPUT_REPLAY:
                b.replay_inputs(s.state, out.kept, k + 1)
            break
        m.fire(Trigger.REJECT, 0.0, {"matched": block.accepted, "eog": block.eog,
                                     "cut": block.cut})
        t0 = b.now()
        done = _roll_back(s, block, batch, snap, out.kept, pos0)
        t = b.now()
        s.stats.rollback_s += t - t0
        if done:
            break
        trigger = Trigger.RETRY
    s.stats.drafted += k
    s.stats.accepted += block.accepted
    commit(s, block, t, draft)
    s.drafter.on_commit(k, block.accepted)
    return block


def _draft_state(s: Slot, stats: dict[str, int], k: int) -> tuple[int | None, int | None]:
    """Invariant 6's facts after drafting: the draft state's position as its drafter
    reports it, and where it belongs: the slot's tokens but the last, then the last and
    the drafter's own drafts but the last (each draft is fed back to draft the next).
    In a chain the member that drafted reports (the chain's merged numbers would not say
    whose state drafted); unknown (None) for a drafter without a state."""
    if isinstance(s.drafter, ChainDrafter):
        stats = s.drafter.used.stats() if s.drafter.used is not None else {}
    position = stats.get("draft_position")
    if position is None:
        return None, None
    return position, len(s.tokens) - 1 + k


def _plain_steps(s: Slot) -> RoundSteps:
    """A non-speculative step: verify only the last committed token."""
    m, b = s.machine, s.backend
    res = _answer((yield VerifyRequest(s.state, [s.tokens[-1]], Keep.NOTHING)))  # no rollback
    out = res.out
    m.fire(Trigger.DECODE, res.duration,
           {"targets": out.targets, "drafted": 0, "batch": 1, **res.shared})
    yield None
    block = accepted_block([], out.targets, b.template.eog_ids, s.config.eog_policy)
    m.fire(Trigger.ACCEPT, 0.0, {"matched": 0, "eog": block.eog})
    return commit(s, block, b.now())


def _roll_back(s: Slot, block: Block, batch: list[int], snap: object, kept: object,
               pos0: int) -> bool:
    """Bring the state to the accepted boundary; False when `reverify` disagreed with the
    verification and the round must verify again."""
    m, b, cfg = s.machine, s.backend, s.config
    keep = block.consumed
    t = b.now()
    match cfg.strategy:
        case Strategy.NONE:
            b.trim(s.state, pos0 + keep)  # the attention part only: the recurrence keeps all
        case Strategy.PER_TOKEN:
            b.select(s.state, kept, keep - 1)
            s.stats.restores += 1
            m.fire(Trigger.RESTORE, b.now() - t, {"mode": "select", "index": keep - 1,
                   "bytes": b.state_bytes(), "position": s.state.position})
        case Strategy.INPUT_REPLAY:
            s.stats.restores += 1
            m.fire(Trigger.RESTORE, 0.0, {"mode": "discard", "bytes": 0, "position": pos0})
            t = b.now()
            b.replay_inputs(s.state, kept, keep)
            m.fire(Trigger.REPLAY, b.now() - t, {"mode": "recurrence", "tokens": keep})
        case Strategy.CHECKPOINT:
            return _restore_and_replay(s, block, batch[:keep], snap, pos0)
    return True


def _restore_and_replay(s: Slot, block: Block, replay: list[int], snap: object,
                        pos0: int) -> bool:
    m, b, cfg = s.machine, s.backend, s.config
    t = b.now()
    b.restore(s.state, snap)
    s.stats.restores += 1
    s.guard.note_restore(pos0)
    m.fire(Trigger.RESTORE, b.now() - t, {"mode": "checkpoint", "bytes": b.state_bytes(),
                                          "position": pos0})
    reverify = cfg.replay_policy is ReplayPolicy.REVERIFY
    t = b.now()
    targets = b.forward(s.state, replay)
    m.fire(Trigger.REPLAY, b.now() - t, {"mode": cfg.replay_policy.value, "tokens": len(replay)})
    if not reverify:
        return True
    expected = [*replay[1:], block.tokens[-1]]
    mismatch = next((i for i, (a, e) in enumerate(zip(targets, expected, strict=True))
                     if a != e), None)
    if mismatch is None:
        return True
    # The replay's own verdict differs from the verification's: re-verify policy goes back.
    t = b.now()
    b.restore(s.state, snap)
    s.stats.restores += 1
    livelock = s.guard.note_restore(pos0)
    m.fire(Trigger.RESTORE, b.now() - t, {
        "mode": "reverify_mismatch", "bytes": b.state_bytes(), "position": pos0, "at": mismatch,
        "expected": expected[mismatch], "actual": targets[mismatch]})
    if not livelock:
        return False
    s.stats.livelocks += 1
    m.fire(Trigger.LIVELOCK, 0.0, {"position": pos0, "restores": s.guard.restores,
                                   "cycle": LIVELOCK_CYCLE, "resolution": "reconstruct"})
    t = b.now()
    b.forward(s.state, replay)
    m.fire(Trigger.REPLAY, b.now() - t, {"mode": "reconstruct", "tokens": len(replay),
                                         "guard": True})
    return True


def commit(s: Slot, block: Block, t: float,
           draft: tuple[int | None, int | None] = (None, None)) -> Block:
    """Commit `block` (the state is already at its boundary) and check the invariants.
    `t` is when the commit work began on the backend's clock; `draft` is invariant 6's
    (draft state position, where it belongs), from `_draft_state`."""
    m, b, cfg = s.machine, s.backend, s.config
    s.tokens.extend(block.tokens)
    position = s.state.position
    digest = b.digest(s.state)
    audit = b.audit(s.state, s.tokens) if cfg.audit else None
    m.fire(Trigger.COMMIT, b.now() - t, {"append": block.tokens, "position": position,
           "digest": digest, "accepted": block.accepted, "cut": block.cut})
    s.guard.note_progress()
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
    for v in check_commit(facts):
        s.stats.violations += 1
        m.fire(Trigger.INVARIANT_VIOLATION, 0.0, v.to_payload())
        if cfg.strict:
            raise InvariantViolationError(f"{v.invariant}: {v.message}")
    return block

