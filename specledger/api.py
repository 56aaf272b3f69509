"""The small public facade: run a configured session into a log, read turn tables back."""

import subprocess
from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from engine.backend import Backend
from engine.config import RunConfig
from engine.conversation import Conversation
from engine.progress import Progress
from engine.session import Session, make_backend
from eventlog import Recorder, create_session, open_db
from eventlog.fold import LogFold, fold_session
from eventlog.records import TurnKey, TurnRecord
from eventlog.turn_summaries import read_summaries
from fsm.draft_profile import DraftProfile
from fsm.turn_metrics import TurnMetrics


@dataclass(frozen=True)
class RunResult:
    """A finished run: its session id in the log and its per-turn metrics."""

    session_id: int
    turns: list[TurnMetrics]
    events: int


@cache
def code_version() -> str:
    """The package version, plus the git commit when running from a checkout."""
    try:
        base = version("specledger")
    except PackageNotFoundError:
        base = "0+unknown"
    root = Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=5, check=False,
        ).stdout.strip()
    except OSError:
        rev = ""
    return f"{base}+g{rev}" if rev else base


def new_session(engine: Engine, config: dict[str, Any], backend: str, seed: int | None = None,
                model_digest: str | None = None, parent_id: int | None = None) -> int:
    """Create a session in the log, stamped with this code's version (its seed stored
    where the run has one); returns its id."""
    return create_session(engine, config=config, backend=backend,
                          seeds={"seed": seed} if seed is not None else {},
                          code_version=code_version(), model_digest=model_digest,
                          parent_id=parent_id)


def run_session(
    config: RunConfig,
    db: str,
    *,
    progress: Progress | None = None,
    parent_id: int | None = None,
    backend: Backend | None = None,
    conversation: Conversation | None = None,
) -> RunResult:
    """Run `config` and record every transition into the log at `db` (path or URL).
    `backend` is one already built for `config` (benchmarks share a loaded checkpoint
    across runs); without it, or without a `conversation`, the configuration's own is
    made."""
    if backend is None:
        backend = make_backend(config)
    caps = backend.capabilities
    config = config.replace(**caps.resolved)  # record what ran, not what was asked ("auto")
    engine = open_db(db, create=True)
    sid = new_session(engine, config.to_dict(), config.backend.value, config.seed,
                      caps.model_digest() if caps.model_digest else None, parent_id)
    with Recorder(engine, sid) as rec:
        turns = Session(config, rec, backend=backend, progress=progress,
                        conversation=conversation).run()
    return RunResult(sid, turns, rec.written)


@dataclass(frozen=True)
class SessionTurns:
    """A session's turns: those that ended (their metrics as recorded, in the order they
    ended), those the log ends inside (a failed or cut session's last ones: their figures
    counted from the events recorded up to there), and each turn's draft profile."""

    ended: list[TurnMetrics]
    partial: list[TurnMetrics]
    profiles: dict[TurnKey, DraftProfile]


def turn_table(engine: Engine, session_id: int) -> list[TurnMetrics]:
    """The per-turn metrics a session recorded at each turn end, in the order turns ended."""
    return session_turns(engine, session_id).ended


def session_turns(engine: Engine, session_id: int) -> SessionTurns:
    """The session's turns: those its turn summaries tell (a row per turn:
    eventlog/turn_summaries.py), the rest folded from the events after the latest of them
    (a live or cut session's turns in progress), or from all of them where the summaries
    cannot tell (a session an older specledger recorded)."""
    stored = read_summaries(engine, session_id)
    closed, after = ([], 0) if stored is None else (stored.ended, stored.open_after)
    # The turns the summaries do not tell: fold the events they lie in.
    still_open: dict[TurnKey, TurnRecord] = {} if after is None else fold_session(
        engine, session_id, LogFold(closed.append), after_seq=after).records
    ended = [TurnMetrics.from_dict(r.metrics) for r in closed if r.metrics is not None]
    # A turn that opened again after it ended is profiled as it was last seen.
    profiles = {(r.slot, r.turn): r.profile for r in [*closed, *still_open.values()]}
    return SessionTurns(ended, [r.stats for r in still_open.values()], profiles)

