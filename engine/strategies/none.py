"""`none`: no rollback of the recurrent state at all; only the attention KV is cut back.
Wrong by design (invariant 2 catches it at the first partial rejection): the baseline
that shows what the other strategies pay for."""

from engine.backend import Keep
from engine.speculative import Block
from engine.strategies.base import RollbackStrategy, Round


class NoRollback(RollbackStrategy):
    """Trim the KV to the accepted boundary; the recurrence keeps every verified token."""

    name = "none"
    keep = Keep.NOTHING

    def roll_back(self, r: Round, block: Block) -> bool:
        """Cut the attention KV; the recurrent state cannot be trimmed, so it stays."""
        r.backend.trim(r.state, r.position + block.consumed)
        return True
