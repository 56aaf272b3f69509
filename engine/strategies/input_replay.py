"""`input_replay`: the verify leaves the recurrent state and records its inputs; the
commit runs only the recurrence over the accepted prefix."""

from engine.backend import Keep
from engine.speculative import Block
from engine.strategies.base import RollbackStrategy, Round
from fsm.states import Trigger


class InputReplay(RollbackStrategy):
    """Replay the recorded inputs."""

    name = "input_replay"
    keep = Keep.INPUTS

    def accept(self, r: Round) -> None:
        """Replay every recorded position."""
        r.backend.replay_inputs(r.state, r.verified.kept, len(r.batch))

    def roll_back(self, r: Round, block: Block) -> bool:
        """Discard the positions past the boundary (nothing to copy), replay the rest."""
        b, m = r.backend, r.work.machine
        m.fire(Trigger.RESTORE, 0.0, {"mode": "discard", "bytes": 0, "position": r.position})
        t = b.now()
        b.replay_inputs(r.state, r.verified.kept, block.consumed)
        m.fire(Trigger.REPLAY, b.now() - t, {"mode": "recurrence", "tokens": block.consumed})
        return True
