"""`none`: only the attention KV is cut back, the recurrent state keeps every verified
token. Wrong by design (invariant 2 catches it): what the others pay for."""

from engine.backend import Keep
from engine.speculative import Block
from engine.strategies.base import RollbackStrategy, Round


class NoRollback(RollbackStrategy):
    """Trim the KV to the accepted boundary."""

    name = "none"
    keep = Keep.NOTHING

    def roll_back(self, r: Round, block: Block) -> bool:
        """Cut the attention KV; the recurrent state cannot be trimmed."""
        r.backend.trim(r.state, r.position + block.consumed)
        return True
