"""The recorder suite's overhead on whole runs: the same run with recording off and on in
alternating pairs, and the seconds spent inside the recorder's own calls."""

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from engine.backend import Backend
from engine.config import RunConfig
from engine.session import Session
from eventlog import NullRecorder, Recorder, open_db
from eventlog.schema import SessionStatus
from fsm.event import Event
from specbench.common import BenchOptions, timed
from specledger.api import new_session


class TimedRecorder(Recorder):
    """A `Recorder` that adds up the seconds spent inside its own calls (`spent`): the
    recording cost of a run measured directly, without a baseline run to subtract."""

    def __init__(self, engine: Engine, session_id: int) -> None:
        self.spent = timed(super().__init__, engine, session_id)[1]

    def append(self, event: Event) -> None:
        """Buffer one event (timed)."""
        self.spent += timed(super().append, event)[1]

    def end_unit(self) -> None:
        """Close a unit, writing when a threshold is reached (timed)."""
        self.spent += timed(super().end_unit)[1]

    def flush(self) -> None:
        """Write every complete unit (timed)."""
        self.spent += timed(super().flush)[1]

    def close(self, status: SessionStatus = SessionStatus.FINISHED) -> None:
        """Write the rest and set the final status (timed)."""
        self.spent += timed(super().close, status)[1]


@dataclass(frozen=True)
class RecordedRun:
    """One run with recording on: wall seconds (session creation to close), seconds inside
    the recorder, events written, and the session's id in its database."""

    seconds: float
    recorder_s: float
    events: int
    session_id: int

    @property
    def direct_overhead(self) -> float:
        """Recorder time over the rest of the run: the estimated on/off - 1."""
        return self.recorder_s / (self.seconds - self.recorder_s)


BackendFactory = Callable[[], Backend | None]


def record_run(config: RunConfig, make_backend: BackendFactory, db: str,
               model_digest: str | None) -> RecordedRun:
    """Run `config` once into a new session of `db`, timing it and the recorder."""
    backend = make_backend()
    engine = open_db(db, create=True)  # schema creation is once per database: not timed
    try:
        start = time.perf_counter()
        sid = new_session(engine, config.to_dict(), config.backend.value, config.seed,
                          model_digest)
        setup_s = time.perf_counter() - start
        with TimedRecorder(engine, sid) as rec:
            Session(config, rec, backend=backend).run()
        seconds = time.perf_counter() - start
    finally:
        engine.dispose()
    return RecordedRun(seconds, setup_s + rec.spent, rec.written, sid)


def _spread(values: Sequence[float]) -> dict[str, Any]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "all": list(values)}


def overhead(config: RunConfig, make_backend: BackendFactory, repeat: int, workdir: Path,
             opts: BenchOptions, model_digest: str | None = None) -> dict[str, Any]:
    """`repeat` off/on pairs (the order alternating within pairs, each on-run into a fresh
    SQLite file), then one recorded run into the benchmark's log."""
    label = config.backend.value
    off: list[float] = []
    on: list[RecordedRun] = []
    for i in range(repeat):
        opts.log(f"recorder: {label} overhead, pair {i + 1}/{repeat}")
        for record in (False, True) if i % 2 == 0 else (True, False):
            if record:
                db = str(workdir / f"{label}-{i}.db")
                on.append(record_run(config, make_backend, db, model_digest))
            else:
                off.append(timed(Session(config, NullRecorder(), backend=make_backend()).run)[1])
    logged = record_run(config, make_backend, opts.db, model_digest)
    pairs = [r.seconds / o - 1.0 for r, o in zip(on, off, strict=True)]
    return {
        "config": config.to_dict(),
        "events": on[-1].events,
        "repeat": repeat,
        "seconds_off": _spread(off),
        "seconds_on": _spread([r.seconds for r in on]),
        "paired_overhead": _spread(pairs),
        "recorder_s": _spread([r.recorder_s for r in on]),
        "recorder_fraction_of_run": statistics.median(r.recorder_s / r.seconds for r in on),
        "direct_overhead": _spread([r.direct_overhead for r in on]),
        "recorder_us_per_event": statistics.median(r.recorder_s / r.events * 1e6 for r in on),
        "bench_session": {"id": logged.session_id, "events": logged.events,
                          "seconds": logged.seconds, "recorder_s": logged.recorder_s},
    }


def torch_backends(config: RunConfig) -> tuple[BackendFactory, str, RunConfig]:
    """A factory of fresh torch backends sharing one loaded checkpoint, the model digest,
    and `config` with the kernels that resolved. The questions are asked once first: the
    held-out functions they come from are parsed once per process (seconds), which is not
    what is measured."""
    from engine.conversation import HeldOutConversation
    from engine.hybrid.backend import TorchBackend
    from engine.hybrid.device import resolve_device
    from engine.hybrid.loader import load_checkpoint

    checkpoint = load_checkpoint(config.model, device=resolve_device(config.device))
    probe = TorchBackend(config, checkpoint)
    HeldOutConversation(config).question(0, 1)
    # Record what ran, not what was asked for ("auto"), as `run_session` does.
    resolved = config.replace(**probe.capabilities.resolved)
    return lambda: TorchBackend(resolved, checkpoint), probe.model_digest(), resolved
