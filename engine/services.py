"""What every slot's work is done with: passed where it is used, never kept in a slot."""

from dataclasses import dataclass

from engine.backend import Backend
from engine.config import RunConfig
from engine.metrics import TurnFold
from engine.slot import SlotWork
from engine.strategies import RollbackStrategy


@dataclass(frozen=True)
class Services:
    """The session's backend and configuration, the rollback strategy its rounds settle
    with, the fold its turn metrics are read from, and each slot's work (by slot id)."""

    backend: Backend
    config: RunConfig
    strategy: RollbackStrategy
    metrics: TurnFold
    work: list[SlotWork]
