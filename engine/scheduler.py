"""The batched schedule (docs/design.md#batched-schedule): the slots run their turns in
lockstep, and every scheduler step verifies all their requests in one target forward.

A step prepares one round in every slot still answering (engine/round.py: each checkpoints
and drafts on its own; slots that plain-decode ask too). One `verify_batch` answers every
round's batch, rows of different lengths; each slot records its verify (with the forward's
`batch_id`, `batch_slots`, `batch_tokens`), then settles on its own row (select, input
replay, restore and replay) and commits. Under `--replay-policy reverify` a round that
disagreed asks again: those retries share the next forward of the same step. A slot's
events keep their meaning, and their order within the slot; only slots interleave.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.backend import BatchVerify
from engine.progress import Progress
from engine.round import Verified, prepare, record, settle
from engine.services import Services
from engine.slot import Slot
from engine.strategies import Round
from engine.turn import OpenTurn, end_turn, open_turn
from fsm.turn_metrics import TurnMetrics


def _no_unit() -> None:
    """A slot's own unit ends are not units under batching: the step's are."""


@dataclass
class _Lane:
    """A slot's turn under the scheduler: its open turn and whether it still answers."""

    turn: OpenTurn
    answering: bool = True  # False once a round committed an EOG


class BatchScheduler:
    """Runs the slots' turns in lockstep, one forward per step over every slot's drafts.
    `blame` names the slots whose work was running when an exception escaped (a forward:
    all its rows), so that the session records their failure."""

    def __init__(self, services: Services, slots: Sequence[Slot], verify_batch: BatchVerify,
                 end_unit: Callable[[], None], progress: Progress | None = None) -> None:
        self.services = services
        self.slots = list(slots)
        self.verify_batch = verify_batch
        self.end_unit = end_unit
        self.progress = progress
        self.forwards = 0  # the batch_id of the latest shared forward
        self.blame: list[Slot] = []

    def run_turns(self, questions: Sequence[Sequence[int]]) -> list[TurnMetrics]:
        """Every slot's next turn (`questions[i]` is slot i's), the turns in lockstep;
        their metrics in slot order."""
        e = self.services
        lanes = []
        for s, question in zip(self.slots, questions, strict=True):
            self.blame = [s]
            lanes.append(_Lane(open_turn(e, s, question, self.progress)))
            self.end_unit()
        done: dict[int, TurnMetrics] = {}
        while lanes:
            stepping: list[tuple[_Lane, int]] = []
            for lane in lanes:
                budget = lane.turn.budget(e) if lane.answering else None
                if budget is not None:
                    stepping.append((lane, budget))
                    continue
                s = lane.turn.slot
                self.blame = [s]
                done[s.id] = end_turn(e, lane.turn, _no_unit)
                if self.progress is not None:
                    self.progress.turn_done()
            if len(stepping) < len(lanes):
                self.end_unit()
            lanes = [lane for lane, _ in stepping]
            if stepping:
                self._step(stepping)
                self.end_unit()
        return [done[s.id] for s in self.slots]

    def _step(self, stepping: Sequence[tuple[_Lane, int]]) -> None:
        """One round in every lane (with its answer budget), verified together: every
        row records its verify before any slot settles."""
        e = self.services
        pending: list[tuple[_Lane, Round]] = []
        for lane, budget in stepping:
            self.blame = [lane.turn.slot]
            pending.append((lane, prepare(e, lane.turn.slot, budget)))
        while pending:
            answers = self._forward([r for _, r in pending])
            for (lane, r), answer in zip(pending, answers, strict=True):
                self.blame = [lane.turn.slot]
                record(r, answer)
            waiting = []
            for lane, r in pending:
                self.blame = [lane.turn.slot]
                block = settle(e, r)
                if block is None:
                    waiting.append((lane, r))
                else:
                    lane.answering = lane.turn.close_round(block, self.progress)
            pending = waiting

    def _forward(self, rounds: Sequence[Round]) -> list[Verified]:
        """One forward over the rounds' batches; each row's answer carries the forward's
        time and its batch fields."""
        self.blame = [r.slot for r in rounds]
        b = self.services.backend
        t = b.now()
        outs = self.verify_batch([r.state for r in rounds], [r.batch for r in rounds],
                                 [r.keep for r in rounds])
        took = b.now() - t
        self.forwards += 1
        shared = {"batch_id": self.forwards, "batch_slots": len(rounds),
                  "batch_tokens": sum(len(r.batch) for r in rounds)}
        return [Verified(out, took, shared) for out in outs]
