"""Re-execution and counterfactuals: run a recorded session again from its recorded
configuration, prompts and seeds, as a new session whose parent is the original.

A plain re-execution compares every new event with the recorded one while the engine runs
and stops at the first divergence, like Temporal's NondeterminismError. A counterfactual
(`--set key=value`) runs to the end and is compared turn by turn: its branch point is the
first divergence.
"""

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from engine.backend import Backend
from engine.config import OBSERVED, BackendKind, RunConfig
from engine.conversation import Conversation
from engine.errors import BackendError
from engine.progress import Progress
from engine.session import Session, make_backend, make_conversation
from eventlog import Recorder, SessionInfo, get_session, open_db
from eventlog.compare import EXACT, Tolerance
from eventlog.diff import Divergence, Follower, TurnDelta, diff_streams
from eventlog.errors import RecordingFailedError
from eventlog.reader import scan_events
from fsm.errors import SpecledgerError
from fsm.event import Event
from specledger.api import new_session
from specledger.runs.observed import observe, questions
from specledger.runs.prompts import RecordedQuestions, recorded_questions

# Changing one of these changes the requests themselves: the recorded prompts no longer
# apply, and the configuration's own source generates them.
NEW_PROMPTS = frozenset({"backend", "model", "prompt_tokens", "question_tokens", "seed"})


class _Diverged(Exception):
    """Raised from the journal to stop the engine at the first divergence."""

    def __init__(self, divergence: Divergence) -> None:
        super().__init__(f"re-execution diverged from the recorded log at seq "
                         f"{divergence.seq} ({divergence.field})")


class FollowingJournal:
    """Records every event of the re-run and checks it against the recorded one."""

    def __init__(self, recorder: Recorder, follower: Follower) -> None:
        self.recorder = recorder
        self.follower = follower

    def append(self, event: Event) -> None:
        """Record, then compare; the first divergence stops the run."""
        self.recorder.append(event)
        found = self.follower.check(event)
        if found is not None:
            raise _Diverged(found)

    def end_unit(self) -> None:
        """Whole units may be written."""
        self.recorder.end_unit()

    def flush(self) -> None:
        """Write every whole unit now."""
        self.recorder.flush()


@dataclass(frozen=True)
class RerunResult:
    """A re-run: the new session, what was changed, and how it compares with the original.
    `error` is the failure the re-run ended with, if any (compared like any other event)."""

    original: int
    session: int
    changes: dict[str, Any]
    tolerance: Tolerance
    compared: int
    divergence: Divergence | None
    turns: list[TurnDelta] = field(default_factory=list)
    error: str | None = None

    @property
    def counterfactual(self) -> bool:
        """Whether a setting was changed."""
        return bool(self.changes)

    @property
    def reproduced(self) -> bool:
        """Every event reproduced (timings aside, within the tolerance)."""
        return self.divergence is None


def rerun(db: str, session_id: int, changes: dict[str, Any] | None = None,
          tol: Tolerance = EXACT, progress: Progress | None = None
          ) -> RerunResult:
    """Re-execute session `session_id` of the log at `db`, with `changes` applied."""
    engine = open_db(db, create=True)
    info = get_session(engine, session_id)
    recorded = recorded_config(info)
    config = recorded.replace(**changes) if changes else recorded
    before, after = recorded.to_dict(), config.to_dict()
    changed = {k: after[k] for k in after if after[k] != before[k]}
    if info.backend in OBSERVED:
        return _rerun_observed(engine, db, info, config, changed, tol, progress)
    backend = make_backend(config)
    conversation = make_conversation(config)
    if not NEW_PROMPTS & changed.keys():
        questions = recorded_questions(scan_events(engine, session_id), backend.template)
        conversation = RecordedQuestions(questions, conversation)
    caps = backend.capabilities
    digest = caps.model_digest() if caps.model_digest else None
    if not changed and info.model_digest and digest and digest != info.model_digest:
        raise BackendError(
            f"session {session_id} was recorded with model {info.model_digest}, but "
            f"{config.model} is now {digest}: a re-execution would not be comparable "
            "(use --set model=... for a counterfactual)")
    new_id = new_session(engine, after, config.backend.value, config.seed, digest, session_id)
    if changed:
        error = _run(engine, new_id, config, backend, conversation, None, progress)
        result = diff_streams(scan_events(engine, session_id), scan_events(engine, new_id), tol)
        return RerunResult(session_id, new_id, changed, tol, result.compared,
                           result.divergence, result.turns, error)
    follower = Follower(scan_events(engine, session_id), tol)
    try:
        error = _run(engine, new_id, config, backend, conversation, follower, progress)
        return RerunResult(session_id, new_id, changed, tol, follower.compared,
                           follower.finish(), [], error)
    finally:
        follower.close()


def recorded_config(info: SessionInfo) -> RunConfig:
    """The run configuration a session was recorded with. An observed engine's session
    (llama.cpp, vLLM) stores it beside what the engine reported (`run`); an imported log
    has none."""
    if info.backend not in OBSERVED:
        return RunConfig.from_dict(info.config)
    run = info.config.get("run")
    if not run:
        raise BackendError(f"session {info.id} was imported from a llama-server log: there is "
                           "no run configuration to repeat (record one with `specledger run "
                           "--backend llama`)")
    return RunConfig.from_dict(run)


def _rerun_observed(engine: Engine, db: str, info: SessionInfo, config: RunConfig,
                    changed: dict[str, Any], tol: Tolerance, progress: Progress | None
                    ) -> RerunResult:
    """An observed engine's session (llama.cpp, vLLM) runs its server again as `config`
    (its recorded run configuration, `changed`); the new session is compared with the
    recorded one event by event (timings aside), as a counterfactual is. An imported log
    has no run to repeat (`recorded_config` refuses it)."""
    if config.backend.value != info.backend:
        raise BackendError(f"a {info.backend} session re-runs on its own server only "
                           f"(--backend {info.backend})")
    from specledger.runs.llama import LlamaEngine
    from specledger.runs.vllm import VllmEngine

    run = LlamaEngine(config) if config.backend is BackendKind.LLAMA else VllmEngine(config)
    new_id = observe(run, questions(config), db, progress, parent_id=info.id).session_id
    result = diff_streams(scan_events(engine, info.id), scan_events(engine, new_id), tol)
    return RerunResult(info.id, new_id, changed, tol, result.compared, result.divergence,
                       result.turns)


def _run(engine: Engine, session_id: int, config: RunConfig, backend: Backend,
         conversation: Conversation, follower: Follower | None, progress: Progress | None
         ) -> str | None:
    """Run `config` into `session_id`, following the recorded log if `follower` is given;
    the failure it ended with, if any."""
    try:
        with Recorder(engine, session_id) as rec:
            journal = rec if follower is None else FollowingJournal(rec, follower)
            Session(config, journal, backend=backend, progress=progress,
                    conversation=conversation).run()
    except _Diverged:
        return None
    except RecordingFailedError:  # the ledger's failure, not the run's
        raise
    except SpecledgerError as exc:  # a recorded failure (strict mode) may reproduce too
        return f"{type(exc).__name__}: {exc}"
    return None
