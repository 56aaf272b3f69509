"""`checkpoint`: copy the recurrent state before drafting; a rejection restores the copy
and replays the accepted prefix with a forward. The replay is reconstruction unless the
`reverify` policy is chosen, which checks the replay's own verdict and verifies again
when it disagrees; that can livelock when numerics depend on the batch shape (llama.cpp
#28060), and the slot's progress guard ends it and records it."""

from engine.backend import Backend, Keep, SeqState, Snapshot
from engine.config import ReplayPolicy
from engine.speculative import Block
from engine.strategies.base import RollbackStrategy, Round
from fsm.states import Trigger

LIVELOCK_CYCLE = ["verify", "reject", "restore", "replay", "restore", "retry"]


class Checkpoint(RollbackStrategy):
    """Snapshot before drafting; restore and replay on a rejection."""

    name = "checkpoint"
    keep = Keep.NOTHING

    def save(self, backend: Backend, state: SeqState) -> Snapshot | None:
        """The snapshot a rejection restores."""
        return backend.snapshot(state)

    def roll_back(self, r: Round, block: Block) -> bool:
        """Restore the snapshot, replay the accepted prefix; under `reverify`, False when
        the replay's verdict differs and the guard lets the round try again."""
        b, m = r.backend, r.work.machine
        replay = r.batch[:block.consumed]
        self._restore(r, "checkpoint")
        policy = r.config.replay_policy
        t = b.now()
        targets = b.forward(r.state, replay)
        m.fire(Trigger.REPLAY, b.now() - t, {"mode": policy.value, "tokens": len(replay)})
        if policy is not ReplayPolicy.REVERIFY:
            return True
        expected = [*replay[1:], block.tokens[-1]]
        at = next((i for i, (a, e) in enumerate(zip(targets, expected, strict=True))
                   if a != e), None)
        if at is None:
            return True
        # The replay's own verdict differs from the verification's: re-verify goes back.
        livelock = self._restore(r, "reverify_mismatch", at=at, expected=expected[at],
                                 actual=targets[at])
        if not livelock:
            return False
        m.fire(Trigger.LIVELOCK, 0.0, {"position": r.position, "restores": r.work.guard.restores,
                                       "cycle": LIVELOCK_CYCLE, "resolution": "reconstruct"})
        t = b.now()
        b.forward(r.state, replay)
        m.fire(Trigger.REPLAY, b.now() - t, {"mode": "reconstruct", "tokens": len(replay),
                                             "guard": True})
        return True

    @staticmethod
    def _restore(r: Round, mode: str, **extra: int) -> bool:
        """Restore the round's snapshot and record it; True when the guard sees a
        livelock."""
        b, w = r.backend, r.work
        if r.saved is None:
            raise RuntimeError("a checkpoint round rolls back without its snapshot")
        t = b.now()
        b.restore(r.state, r.saved)
        livelock = w.guard.note_restore(r.position)
        if b.capabilities.checkpoint_tensors:
            extra = {**extra, "tensors": b.capabilities.checkpoint_tensors}
        w.machine.fire(Trigger.RESTORE, b.now() - t, {
            "mode": mode, "bytes": b.state_bytes(), "position": r.position, **extra})
        return livelock
