"""One imported llama-server round, fired through the round machine with the triggers our
own engine fires for the same steps (engine/round.py), and its payload types
(fsm/payloads.py, docs/events.md), so a llama.cpp session reads, projects and is checked
like ours.

How llama-server rolls a partial acceptance back depends on the target's memory, which the
log names: with a FULL-rollback context (`speculative decoding will use checkpoints`) it
saves a speculative checkpoint before the verify (`begin`, strategy `checkpoint`),
restores it (`restore`) and verifies the accepted tokens again (`replay`, policy
`reverify`: the replay judges them anew, which is what can livelock); with per-sequence
recurrent states (`n_rs_seq` > 0, strategy `per_token`) it keeps the state after every
verified position and selects the accepted one, which it does not log: that `restore`
(mode `select`) carries `logged: false`.

What the log does not show is absent or None, never guessed: a drafted token is known
when the drafter printed its candidates or when it was accepted (it equals the target's
token), a target token only up to the first rejection, no state digest ever.
"""

from collections.abc import Generator, Sequence
from dataclasses import dataclass

from adapters.llama.ledger.tasks import LlamaRound
from adapters.llama.log.records import StopReason
from adapters.llama.server.options import our_drafter
from engine.config import Strategy
from fsm.machine import RoundMachine
from fsm.payloads import Begin, Draft, Restore
from fsm.states import Trigger

MIB = 2**20
Step = tuple[int, float | None]
"""Where the next events happened: a log line and its time (None: no timestamp)."""


@dataclass(frozen=True)
class RoundResult:
    """What one round committed: the block (None where an id is unknown) and the state
    position after it."""

    block: list[int | None]
    position: int


def accepted_drafts(rnd: LlamaRound) -> int:
    """Drafts the round accepted, as llama-server counts them: the kept ids less the
    target's own token, and less the replayed correction after a checkpoint restore."""
    if not rnd.speculative or rnd.kept is None:
        return 0
    return rnd.kept.ids - 1 - (1 if rnd.restores else 0)


def first_verdict(rnd: LlamaRound) -> int:
    """Drafts the first verification accepted: after a restore, the replay re-verifies
    those and the correction (its batch is one longer)."""
    if rnd.verdicts:
        return rnd.verdicts[0].accepted
    if rnd.restores and rnd.replays:
        return rnd.replays[0] - 1
    return accepted_drafts(rnd)


def round_block(rnd: LlamaRound) -> tuple[list[int | None], int | None, int]:
    """The tokens the round put in the slot, the index of the EOG among them, and the
    state's position after it. Normally the verified tokens are consumed and the last
    kept id (`sampled`) waits for the next batch, as our engine's last committed token
    does. A task that stopped inside the block emitted only its head, yet every kept id
    but the last went into the slot and the state: those stay behind the stop (accepted
    drafts where the log names them, else None), and the waiting `sampled` is dropped at
    release, so the block ends before it and the state has consumed all of it."""
    emitted: list[int | None] = list(rnd.tokens)
    eog = len(emitted) - 1 if rnd.stop is StopReason.EOS else None
    if not rnd.speculative or rnd.kept is None or len(emitted) >= rnd.kept.ids:
        return emitted, eog, rnd.n_tokens + len(emitted)
    known_drafts = len(rnd.draft_ids) if not rnd.restores else first_verdict(rnd)
    for j in range(len(emitted), rnd.kept.ids - 1):
        emitted.append(rnd.draft_ids[j] if j < min(known_drafts, len(rnd.draft_ids)) else None)
    return emitted, eog, rnd.n_tokens + rnd.kept.ids


def round_drafter(rnd: LlamaRound, chain: Sequence[str]) -> str | None:
    """Who drafted the round, by our name: the drafter the log names for it (llama.cpp
    tries its chain in a fixed order and logs the one that drafted), else the chain's only
    drafter, else None (unknown)."""
    if rnd.spec_type is not None:
        return our_drafter(rnd.spec_type)
    return our_drafter(chain[0]) if len(chain) == 1 else None


def _drafts(rnd: LlamaRound, block: list[int | None], matched: int) -> list[int | None]:
    """The drafted ids: the logged candidates, else the accepted ones (equal to the
    target's) and None for the rest."""
    if rnd.draft_ids:
        return list(rnd.draft_ids)
    head = block[:matched]
    return [*head, *[None] * (rnd.drafted - len(head))]


def round_steps(m: RoundMachine, rnd: LlamaRound, chain: Sequence[str], n_rs_seq: int | None,
                draft_recomputed: int | None = None) -> Generator[Step, None, RoundResult]:
    """Fire one round's transitions on `m` (its turn and round already set; `chain`: the
    server's speculative types; `draft_recomputed`: the slot's draft model's recomputed
    history tokens so far, where the log shows them); before each group of them, yield the
    log line and time they happened at. Returns what the round committed."""
    block, eog, position = round_block(rnd)
    yield rnd.first_line, rnd.t
    if not rnd.speculative:
        m.fire(Trigger.DECODE, 0.0, {"targets": block, "drafted": 0, "batch": 1})
        m.fire(Trigger.ACCEPT, 0.0, {"matched": 0, "eog": eog})
        yield rnd.last_line, rnd.t_end
        m.fire(Trigger.COMMIT, _span(rnd), {"append": block, "position": position,
                                            "accepted": 0, "cut": 0})
        return RoundResult(block, position)
    k, matched, accepted = rnd.drafted, first_verdict(rnd), accepted_drafts(rnd)
    ckpt = rnd.spec_ckpt
    strategy = Strategy.CHECKPOINT if ckpt is not None or rnd.restores else Strategy.PER_TOKEN
    begin: Begin = {"strategy": strategy.value, "position": rnd.n_tokens}
    if ckpt is not None and ckpt.size_mib is not None:
        begin |= {"bytes": round(ckpt.size_mib * MIB), "draft_bytes":
                  round((ckpt.draft_mib or 0.0) * MIB)}
    m.fire(Trigger.BEGIN, 0.0, begin)
    drafts = _drafts(rnd, block, matched)
    draft: Draft = {"drafts": drafts, "drafter": round_drafter(rnd, chain)}
    if draft_recomputed is not None:
        draft["draft_recomputed"] = draft_recomputed
    m.fire(Trigger.DRAFT, 0.0, draft)
    targets = [*block[:matched + 1], *[None] * (k - matched)]
    m.fire(Trigger.VERIFY, 0.0, {"drafts": drafts, "targets": targets, "batch": k + 1,
                                 "drafted": k})
    if matched == k:
        m.fire(Trigger.ACCEPT, 0.0, {"matched": matched, "eog": eog})
    else:
        m.fire(Trigger.REJECT, 0.0, {"matched": matched, "eog": eog, "cut": 0})
    yield from _rollback(m, rnd, matched, n_rs_seq)
    yield rnd.last_line, rnd.t_end
    m.fire(Trigger.COMMIT, _span(rnd), {"append": block, "position": position,
                                        "accepted": accepted, "cut": 0})
    return RoundResult(block, position)


def partial_steps(m: RoundMachine, rnd: LlamaRound, chain: Sequence[str]
                  ) -> Generator[Step, None, None]:
    """What the log shows of a round it ends inside: the verification and the restores
    and replays so far, committing nothing (a livelock the server was killed in ends
    so)."""
    yield rnd.first_line, rnd.t
    if not rnd.speculative:
        m.fire(Trigger.DECODE, 0.0, {"targets": [], "drafted": 0, "batch": 1})
        return
    strategy = Strategy.CHECKPOINT if rnd.spec_ckpt is not None else Strategy.PER_TOKEN
    m.fire(Trigger.BEGIN, 0.0, {"strategy": strategy.value, "position": rnd.n_tokens})
    drafts: list[int | None] = list(rnd.draft_ids) or [None] * rnd.drafted
    m.fire(Trigger.DRAFT, 0.0, {"drafts": drafts, "drafter": round_drafter(rnd, chain)})
    m.fire(Trigger.VERIFY, 0.0, {"drafts": drafts, "batch": rnd.drafted + 1,
                                 "drafted": rnd.drafted})
    if rnd.restores:
        m.fire(Trigger.REJECT, 0.0, {"matched": first_verdict(rnd), "eog": None, "cut": 0})
        yield from _rollback(m, rnd, first_verdict(rnd), None)


def _rollback(m: RoundMachine, rnd: LlamaRound, matched: int, n_rs_seq: int | None
              ) -> Generator[Step, None, None]:
    """The restores and replays of a partial acceptance."""
    if rnd.restores:
        for i, ckpt in enumerate(rnd.restores):
            yield ckpt.line, ckpt.t
            restore: Restore = {"mode": "checkpoint", "position": rnd.n_tokens}
            if ckpt.size_mib is not None:
                restore["bytes"] = round(ckpt.size_mib * MIB)
            m.fire(Trigger.RESTORE, 0.0, restore)
            if i < len(rnd.replays):
                m.fire(Trigger.REPLAY, 0.0, {"mode": "reverify", "tokens": rnd.replays[i] + 1})
    elif matched < rnd.drafted:
        m.fire(Trigger.RESTORE, 0.0, {"mode": "select", "index": matched, "position":
                                      rnd.n_tokens + matched + 1, "logged": False,
                                      "n_rs_seq": n_rs_seq})


def _span(rnd: LlamaRound) -> float:
    """The round's wall time on the server's clock, when the log has timestamps."""
    if rnd.t is None or rnd.t_end is None:
        return 0.0
    return max(0.0, rnd.t_end - rnd.t)
