"""A live log's records folded into requests, each fired through the import's own round
machine (adapters/llama/ledger/fold.py, ledger.py) the moment its slot is released: one
`Request` per llama-server task, its events numbered from 1 as a session of its own.
The slots' machines and states live on between requests, so a request's kept prefix,
its re-prefill and its stray tokens are judged against what its slot held before, as
`import` judges them over a whole log. With an `AnswerFeed`, a released request is fired
once its answer is there (or its wait is over), with that answer cross-checked as
`import --responses` checks it."""

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from adapters.llama.ledger.fold import TaskFolder
from adapters.llama.ledger.provenance import Provenance, session_config
from adapters.llama.ledger.record import TaskLedger
from adapters.llama.ledger.rounds import accepted_drafts
from adapters.llama.ledger.tasks import LlamaTask, TaskFold, Truncation
from adapters.llama.log.facts import ServerInfo
from adapters.llama.log.reader import LogReading
from adapters.llama.log.records import Record, RecordKind
from fsm.errors import INTERNAL_ERRORS
from fsm.turn_metrics import TurnMetrics
from specledger.runs.observed import UnitJournal
from specledger.watch.answers import Answer, AnswerFeed
from specledger.watch.stream import LineCounts, Piece

K = RecordKind
_ROUND_KINDS = (K.DRAFT, K.DECODE, K.TOKEN)


@dataclass(frozen=True)
class RoundTally:
    """One round of a request: its drafter, drafts verified and accepted."""

    drafter: str
    drafted: int
    accepted: int


@dataclass
class Request:
    """One recorded llama-server task: where its first line is (`start`, the file's
    `dev`/`ino`), its `key` (unique to that line of that file), the events of its
    session, its metrics (None when it was cut), its rounds, why it is incomplete
    (`error`), the stored config, the log time and line of its last line, and, when
    answers are followed, the one it was checked against (`answer`) or that none came
    (`unanswered`), and the number of the server run it came from (`run`: the watch
    numbers the runs it meets, files and restarts within them, from 1; log order is
    (run, last line))."""

    task: LlamaTask
    key: str
    start: int
    journal: UnitJournal
    metrics: TurnMetrics | None
    rounds: list[RoundTally]
    error: str | None
    config: dict[str, Any]
    last_line: int
    last_t: float | None
    answer: Answer | None = None
    unanswered: bool = False
    run: int = 0


def request_key(dev: int, ino: int, start: int, first_line: bytes) -> str:
    """What names a request across runs: its file, the offset of its first line and the
    line itself (its time prefix and task id)."""
    return hashlib.sha256(b"%d:%d:%d:" % (dev, ino, start) + first_line).hexdigest()[:32]


class RequestRecorder:
    """Folds the records of one file (one server's life, or the part of it after a
    resume) and fires each request when its slot is released. `server` is the stream's
    facts, filled as they are read; `resumed`: the log was entered mid-way, so no slot is
    known to start empty; `answers`: the clients' answers, each released request waits
    for its own, but one `known` by its key (recorded before, it is read again) takes
    none; `run`: the number its requests carry."""

    def __init__(self, server: ServerInfo, path: str, dev: int, ino: int,
                 resumed: bool, answers: AnswerFeed | None = None,
                 known: Callable[[str], bool] = lambda _: False, run: int = 0) -> None:
        self.server, self.path, self.dev, self.ino, self.run = server, path, dev, ino, run
        self.answers, self.known = answers, known
        self.waiting: list[tuple[LlamaTask, float]] = []  # released, in order, since when
        self.folder = TaskFolder(adopt=False)
        self.ledger = TaskLedger(LogReading(records=[], server=server), UnitJournal(),
                                 draft_reuse_logged=False)
        self.ledger.rounds_visible = False
        self.resumed = resumed
        self.kinds: dict[RecordKind, Record] = {}  # one record of each kind seen (provides)
        self.starts: dict[int, tuple[int, int, str]] = {}  # task id -> (offset, line, key)

    def open_lines(self) -> list[tuple[int, int]]:
        """Where the requests being served now (not yet released) start: (offset, line)."""
        return [self.starts[t.task][:2] for t in self.folder.out.tasks if t.task in self.starts]

    def feed(self, piece: Piece, counts: LineCounts) -> list[Request]:
        """Fold `piece` (lines of one server run: each has a recorder of its own); the
        requests it completed."""
        for r in piece.records:
            self.kinds.setdefault(r.kind, r)
            if r.kind in _ROUND_KINDS:
                self.ledger.rounds_visible = True
            try:
                self.folder.apply(r)
            except INTERNAL_ERRORS as exc:  # a bug: the CLI's report says where it struck
                exc.add_note(f"folding line {r.line} of {self.path}")
                raise
            if r.kind is K.TASK_STARTED and r.task is not None and r.line in piece.starts:
                at, raw = piece.starts[r.line]
                self.starts[r.task] = (at, r.line, request_key(self.dev, self.ino, at, raw))
            elif r.kind is K.RELEASED and r.task is not None:
                task = self.folder.by_id.get(r.task)
                if task is not None and task.released is not None:
                    self.waiting.append((task, time.monotonic()))
        return self.ready(counts)

    def ready(self, counts: LineCounts, force: bool = False) -> list[Request]:
        """The released requests that can be recorded now: each whose answer is there,
        whose wait is over (or `force`), and whose slot has no earlier one waiting."""
        done: list[Request] = []
        blocked: set[int] = set()
        now = time.monotonic()
        for task, since in list(self.waiting):
            if task.slot in blocked:
                continue
            answers = None if self.known(self.starts.get(task.task, (0, 0, ""))[2]) else (
                self.answers)
            answer = answers.take(task) if answers is not None else None
            if answer is None and answers is not None and not force and (
                    now - since < answers.wait_s):
                blocked.add(task.slot)
                continue
            self.waiting.remove((task, since))
            done.append(self._fire(task, None, counts, answer))
        return done

    def stop(self, counts: LineCounts) -> list[Request]:
        """The released requests still waiting for an answer, recorded with what is
        there; the requests still being served, recorded as cut here."""
        done = self.ready(counts, force=True)
        fold = self.folder.finish()
        return done + [self._fire(next(t for t in fold.tasks if t.task == cut.task), cut,
                                  counts, None) for cut in list(fold.truncated)]

    def _fire(self, task: LlamaTask, cut: Truncation | None, counts: LineCounts,
              answer: Answer | None) -> Request:
        ledger = self.ledger
        journal = ledger.journal = UnitJournal()
        if self.resumed and task.slot not in ledger.slots:
            ledger.slot(task.slot).length = None  # it may hold an earlier request's tokens
        try:
            for _, t in ledger.task_units(task, None, answer.facts if answer else None, cut):
                ledger.set_time(t)
        except INTERNAL_ERRORS as exc:  # a bug: the CLI's report says where it struck
            exc.add_note(f"recording task {task.task} of slot {task.slot}, lines "
                         f"{task.first_line}-{task.last_line} of {self.path}")
            raise
        for seq, ev in enumerate(journal.events, 1):
            ev.seq = seq
        metrics = ledger.turns.pop() if ledger.turns else None
        rounds = [RoundTally(rnd.spec_type or "unnamed", rnd.drafted, accepted_drafts(rnd))
                  for rnd in task.rounds if rnd.complete and rnd.speculative]
        start, _, key = self.starts.pop(task.task, (-1, 0, ""))
        fold = TaskFold(tasks=[task], truncated=[cut] if cut is not None else [])
        reading = LogReading(records=list(self.kinds.values()), server=self.server,
                             lines=counts.lines, parsed=counts.parsed,
                             skipped=counts.skipped, unknown=counts.unknown)
        prov = Provenance(log_path=self.path, responses_path=str(self.answers.path)
                          if self.answers is not None else None)
        config = session_config(reading, fold, prov, answer.responses if answer else None,
                                int(answer is not None))
        error = (f"watch stopped inside task {task.task} (slot {task.slot}, line "
                 f"{cut.line})" if cut is not None else None)
        if cut is None:
            self.folder.forget(task)
        last = task.released
        return Request(task, key, start, journal, metrics, rounds, error, config,
                       last.line if last is not None else task.last_line,
                       last.t if last is not None else None, answer,
                       self.answers is not None and answer is None and cut is None,
                       self.run)
