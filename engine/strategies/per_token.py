"""`per_token`: the verify keeps the recurrent state after every batch position; a
rejection selects the one at the accepted boundary."""

from engine.backend import Keep
from engine.speculative import Block
from engine.strategies.base import RollbackStrategy, Round
from fsm.states import Trigger


class PerToken(RollbackStrategy):
    """Select the kept state."""

    name = "per_token"
    keep = Keep.PER_TOKEN

    def roll_back(self, r: Round, block: Block) -> bool:
        """The state after batch position `consumed - 1` becomes live."""
        b, index = r.backend, block.consumed - 1
        t = b.now()
        b.select(r.state, r.verified.kept, index)
        r.work.machine.fire(Trigger.RESTORE, b.now() - t, {
            "mode": "select", "index": index, "bytes": b.state_bytes(),
            "position": r.state.position})
        return True
