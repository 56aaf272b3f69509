"""The rollback strategies, one class a file (`base.RollbackStrategy` says what one is),
and the configuration's names for them."""

from engine.config import Strategy
from engine.strategies.base import RollbackStrategy, Round
from engine.strategies.checkpoint import Checkpoint
from engine.strategies.input_replay import InputReplay
from engine.strategies.none import NoRollback
from engine.strategies.per_token import PerToken

STRATEGIES: dict[Strategy, type[RollbackStrategy]] = {
    Strategy(c.name): c for c in (Checkpoint, PerToken, InputReplay, NoRollback)}


def strategy_for(name: Strategy) -> RollbackStrategy:
    """The strategy the configuration names."""
    return STRATEGIES[name]()


__all__ = ["STRATEGIES", "RollbackStrategy", "Round", "strategy_for"]
