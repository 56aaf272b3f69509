"""A session: the configured conversations, run turn by turn, every transition journaled."""

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.backend import Backend
from engine.config import BackendKind, RunConfig, Schedule
from engine.conversation import Conversation, HeldOutConversation, SimConversation
from engine.drafters import make_drafter
from engine.errors import ConfigError
from engine.metrics import TurnFold
from engine.progress import Progress
from engine.scheduler import BatchScheduler
from engine.services import Services
from engine.slot import Slot, SlotWork
from engine.strategies import RollbackStrategy, strategy_for
from engine.turn import run_turn
from fsm.event import Event
from fsm.invariants import ProgressGuard
from fsm.machine import RoundMachine
from fsm.states import Trigger
from fsm.turn_metrics import TurnMetrics


class Journal(Protocol):
    """Where a session's events go: `eventlog.Recorder`, or `MemoryJournal`."""

    def append(self, event: Event) -> None:
        """Take one event."""

    def end_unit(self) -> None:
        """Everything appended so far forms whole units (rounds); a write may happen."""

    def flush(self) -> None:
        """Write every whole unit now."""


@dataclass
class MemoryJournal:
    """Keeps events in a list (tests, benchmarks); `eventlog.NullRecorder` drops them."""

    events: list[Event] = field(default_factory=list)

    def append(self, event: Event) -> None:
        """Keep the event."""
        self.events.append(event)

    def end_unit(self) -> None:
        """Nothing to write."""

    def flush(self) -> None:
        """Nothing to write."""


def make_backend(config: RunConfig) -> Backend:
    """The backend named by the configuration."""
    if config.backend is BackendKind.SIM:
        from engine.sim.backend import SimBackend

        return SimBackend(config)
    import torch

    from engine.hybrid.backend import TorchBackend

    # Process-wide in torch. Set where a configuration makes its own backend (a run, a
    # re-execution); benchmarks that hand in backends choose their threads themselves.
    torch.set_num_threads(config.threads)
    return TorchBackend(config)


def make_conversation(config: RunConfig) -> Conversation:
    """The configuration's own workload: sim tokens, or the torch held-out corpus."""
    if config.backend is BackendKind.SIM:
        return SimConversation(config)
    return HeldOutConversation(config)


class Session:
    """Runs `config.turns` turns in each of `config.slots` slots against one backend,
    asking what `conversation` says (both made from the configuration when not given),
    on the configured schedule: slot after slot, or the slots batched in lockstep. Rounds
    settle with `strategy`, the configuration's unless one is given (a new strategy is
    one class, engine/strategies/base.py)."""

    def __init__(
        self,
        config: RunConfig,
        journal: Journal,
        backend: Backend | None = None,
        progress: Progress | None = None,
        conversation: Conversation | None = None,
        strategy: RollbackStrategy | None = None,
    ) -> None:
        self.config = config
        self.journal = journal
        self.backend = backend or make_backend(config)
        self.conversation = conversation or make_conversation(config)
        self.progress = progress
        batched = config.schedule is Schedule.BATCHED
        verify_batch = self.backend.capabilities.verify_batch
        if batched and verify_batch is None:
            raise ConfigError(f"schedule: the {self.backend.name} backend has no batched "
                              "verify (capabilities.verify_batch); run it with --schedule "
                              "sequential")
        metrics = TurnFold(journal)
        next_seq = itertools.count(1).__next__
        # What every slot's drafter shares: the backend (the MTP head uses its loaded
        # target), ngram-mod's pool, a draft model.
        shared: dict[str, object] = {"backend": self.backend}
        self.slots = [Slot(i, self.backend.new_state()) for i in range(config.slots)]
        work = [SlotWork(RoundMachine(i, metrics, next_seq, self.backend.now),
                         make_drafter(config, i, shared), ProgressGuard(config.livelock_guard))
                for i in range(config.slots)]
        self.services = Services(self.backend, config, strategy or strategy_for(config.strategy),
                                 metrics, work)
        self.scheduler = (BatchScheduler(self.services, self.slots, verify_batch,
                                         journal.end_unit, progress)
                          if batched and verify_batch is not None else None)

    def run_turn(self, slot: Slot) -> TurnMetrics:
        """The next turn of one slot, alone (each verify its own forward, whatever the
        schedule: batching needs every slot's turn at once, `run`)."""
        turn = self.services.work[slot.id].machine.turn + 1
        question = self.conversation.question(slot.id, turn)
        try:
            metrics = run_turn(self.services, slot, question, self.journal.end_unit,
                               self.progress)
        except Exception as exc:
            self._fail([slot], exc)
            raise
        if self.progress is not None:
            self.progress.turn_done()
        return metrics

    def view(self, slot: Slot) -> dict[str, Any]:
        """The live slot state, in the projection's terms."""
        return {"slot": slot.id, "tokens": list(slot.tokens), "position": slot.state.position,
                "state": self.services.work[slot.id].machine.state.value,
                "digest": self.backend.digest(slot.state)}

    def run(self) -> list[TurnMetrics]:
        """All turns of all slots (turn-major, so slots interleave like a server's)."""
        out: list[TurnMetrics] = []
        for _ in range(self.config.turns):
            if self.scheduler is not None:
                out.extend(self._batched_turns(self.scheduler))
                self.journal.flush()
                continue
            for slot in self.slots:
                out.append(self.run_turn(slot))
                self.journal.flush()
        return out

    def _batched_turns(self, scheduler: BatchScheduler) -> list[TurnMetrics]:
        """The next turn of every slot, in lockstep (`engine/scheduler.py`); a failure is
        recorded on the slots whose work raised."""
        questions = [self.conversation.question(s.id, w.machine.turn + 1)
                     for s, w in zip(self.slots, self.services.work, strict=True)]
        try:
            return scheduler.run_turns(questions)
        except Exception as exc:
            self._fail(scheduler.blame, exc)
            raise

    def _fail(self, slots: Sequence[Slot], exc: Exception) -> None:
        """Record `exc` as the failure of `slots`, after the whole units before it."""
        self.journal.end_unit()
        for slot in slots:
            machine = self.services.work[slot.id].machine
            machine.fire(Trigger.FAIL, 0.0, {"error": f"{type(exc).__name__}: {exc}"})
        self.journal.end_unit()
