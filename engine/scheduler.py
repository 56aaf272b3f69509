"""The batched schedule (docs/design.md#batched-schedule): the slots run their turns in
lockstep, and every scheduler step verifies all their requests in one target forward.

A step starts one round in every slot still answering; each round checkpoints and drafts
on its own and then asks for its verify (`engine/round.py`, `round_steps`); slots that
plain-decode ask too. One `verify_batch` answers every request, rows of different
lengths; each slot records its verify (with the forward's `batch_id`, `batch_slots`,
`batch_tokens`), then does its strategy's work on its own row (select, input replay,
restore and replay) and commits. Under `--replay-policy reverify` a round that disagreed
asks again: those retries share the next forward of the same step. A slot's events keep
their meaning, and their order within the slot; only slots interleave.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.backend import Backend, BatchVerify
from engine.metrics import TurnMetrics
from engine.progress import Progress
from engine.round import RoundSteps, Verified, VerifyRequest, round_steps
from engine.slot import Slot
from engine.turn import OpenTurn, end_turn, open_turn


def _no_unit() -> None:
    """A slot's own unit ends are not units under batching: the step's are."""


@dataclass
class _Lane:
    """A slot's turn under the scheduler: its open turn, the round in progress and its
    request, and when that round began on the backend's clock (the slot's last event)."""

    turn: OpenTurn
    began: float
    answering: bool = True  # False once a round committed an EOG
    steps: RoundSteps | None = None
    request: VerifyRequest | None = None


class BatchScheduler:
    """Runs the slots' turns in lockstep, one forward per step over every slot's drafts.
    `blame` names the slots whose work was running when an exception escaped (a forward:
    all its rows), so that the session records their failure."""

    def __init__(self, slots: Sequence[Slot], backend: Backend, verify_batch: BatchVerify,
                 end_unit: Callable[[], None], progress: Progress | None = None) -> None:
        self.slots = list(slots)
        self.backend = backend
        self.verify_batch = verify_batch
        self.end_unit = end_unit
        self.progress = progress
        self.forwards = 0  # the batch_id of the latest shared forward
        self.blame: list[Slot] = []

    def run_turns(self, questions: Sequence[Sequence[int]]) -> list[TurnMetrics]:
        """Every slot's next turn (`questions[i]` is slot i's), the turns in lockstep;
        their metrics in slot order."""
        lanes = []
        for s, question in zip(self.slots, questions, strict=True):
            self.blame = [s]
            turn = open_turn(s, question, self.progress)
            lanes.append(_Lane(turn, self.backend.now()))
            self.end_unit()
        done: dict[int, TurnMetrics] = {}
        while lanes:
            stepping: list[tuple[_Lane, int]] = []
            for lane in lanes:
                budget = lane.turn.budget() if lane.answering else None
                if budget is not None:
                    stepping.append((lane, budget))
                    continue
                s = lane.turn.slot
                self.blame = [s]
                done[s.id] = end_turn(lane.turn, _no_unit)
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
        """One round in every lane (with its answer budget), verified together."""
        pending = []
        for lane, budget in stepping:
            self.blame = [lane.turn.slot]
            lane.steps = round_steps(lane.turn.slot, budget)
            lane.request = next(lane.steps)
            pending.append(lane)
        while pending:
            answers = self._forward(pending)
            for lane, answer in zip(pending, answers, strict=True):
                self.blame = [lane.turn.slot]
                self._steps(lane).send(answer)  # the lane records its verify
            waiting = []
            for lane in pending:
                self.blame = [lane.turn.slot]
                if self._advance(lane):
                    waiting.append(lane)
            pending = waiting

    def _forward(self, lanes: Sequence[_Lane]) -> list[Verified]:
        """One forward over the lanes' requests; each row's answer carries the forward's
        time and its batch fields."""
        requests = [lane.request for lane in lanes]
        if any(r is None for r in requests):
            raise RuntimeError("a lane reached the forward without a verify request")
        rows = [r for r in requests if r is not None]
        self.blame = [lane.turn.slot for lane in lanes]
        b = self.backend
        t = b.now()
        outs = self.verify_batch([r.state for r in rows], [r.batch for r in rows],
                                 [r.keep for r in rows])
        took = b.now() - t
        self.forwards += 1
        shared = {"batch_id": self.forwards, "batch_slots": len(rows),
                  "batch_tokens": sum(len(r.batch) for r in rows)}
        return [Verified(out, took, shared) for out in outs]

    def _advance(self, lane: _Lane) -> bool:
        """Let a lane's round go on after its verify: True when it asks again (a retry),
        False when it committed (the round is closed, NEXT announced where the answer
        goes on)."""
        try:
            lane.request = self._steps(lane).send(None)
        except StopIteration as finished:
            b = self.backend
            lane.steps, lane.request = None, None
            lane.answering = lane.turn.close_round(finished.value, lane.began, b.now(),
                                                   self.progress)
            lane.began = b.now()
            return False
        if lane.request is None:
            raise RuntimeError("a round yielded None where it must ask for a verify")
        return True

    @staticmethod
    def _steps(lane: _Lane) -> RoundSteps:
        if lane.steps is None:
            raise RuntimeError("a lane has no round in progress")
        return lane.steps
