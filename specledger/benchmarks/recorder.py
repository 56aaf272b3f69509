"""Suite `recorder`: what recording costs.

Four numbers: the recorder's write rate on SQLite (group commit against a commit per
round), read-back and projection speed, database bytes per event, and the overhead of
recording on whole runs of the sim and of the real engine (the torch backend with the
shipped models). The overhead is measured twice: as paired wall times of the same run
with `NullRecorder` and with `Recorder` (alternating, because a shared 2-core machine is
noisy), and as the time spent inside the recorder's own calls, which needs no baseline
run and is far less noisy. The goal uses the second.
"""

import platform
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy
from sqlalchemy import Engine

from engine.backend import Backend
from engine.config import RunConfig
from engine.session import Session
from eventlog import NullRecorder, Recorder, create_session, iter_events, open_db, project
from eventlog.schema import SessionStatus
from fsm.event import Event
from fsm.states import RoundState, Trigger
from specledger.api import code_version
from specledger.benchmarks.common import (
    BenchOptions,
    Goal,
    SuiteResult,
    md_table,
    new_figure,
    save_figure,
)

UNIT = 6  # events per synthetic round
GOAL_FRACTION = 0.05  # recording may cost at most 5% of the real engine's run time
COMMAND = "specledger bench recorder"


@dataclass(frozen=True)
class Sizes:
    """How big each measurement is."""

    events: int              # synthetic events for the throughput measurement
    sim: RunConfig           # the sim run whose recording overhead is measured
    torch_turns: int
    torch_answer_tokens: int
    repeat: int              # off/on pairs per engine


FULL = Sizes(
    events=200_000,
    sim=RunConfig(turns=3, answer_tokens=4000, prompt_tokens=2048, acceptance=0.7,
                  draft_max=8),
    torch_turns=2,
    torch_answer_tokens=256,
    repeat=5,
)
QUICK = Sizes(
    events=6_000,
    sim=RunConfig(turns=1, answer_tokens=200, prompt_tokens=256, acceptance=0.7, draft_max=8),
    torch_turns=1,
    torch_answer_tokens=16,
    repeat=2,
)


# --- throughput on synthetic rounds --------------------------------------------------


def synthetic_events(n: int) -> list[Event]:
    """`n` events (whole rounds) shaped like a k=4 speculative round with payloads as the
    engine writes them: draft tokens, counts, appended tokens, positions and digests."""
    s, t = RoundState, Trigger
    out: list[Event] = []
    position = 0
    for rnd in range(n // UNIT):
        drafts = [(rnd * 31 + i) % 151_936 for i in range(4)]
        accepted = rnd % 4  # always a partial accept: the costly path
        committed = [*drafts[:accepted], (rnd * 7) % 151_936]
        position += len(committed)
        steps = (
            (t.BEGIN, s.IDLE, s.CHECKPOINT, {"strategy": "checkpoint", "bytes": 2_097_152}),
            (t.DRAFT, s.CHECKPOINT, s.SPECULATE, {"drafts": drafts, "drafter": "ngram-mod"}),
            (t.VERIFY, s.SPECULATE, s.VERIFY, {"drafts": drafts, "drafted": 4}),
            (t.REJECT, s.VERIFY, s.REJECT, {"accepted": accepted}),
            (t.RESTORE, s.REJECT, s.RESTORE, {"position": position - 1, "bytes": 2_097_152}),
            (t.COMMIT, s.RESTORE, s.COMMIT,
             {"append": committed, "position": position - 1, "digest": f"{rnd:016x}"}),
        )
        slot, turn = rnd % 4, rnd // 64
        for i, (trigger, source, dest, payload) in enumerate(steps):
            seq = rnd * UNIT + i
            out.append(
                Event(seq, slot, turn, rnd, trigger, source, dest, seq * 1e-4, 1e-4, payload)
            )
    return out


def _feed(sink: Recorder | NullRecorder, events: list[Event]) -> float:
    """Seconds to append `events` round by round and close: what the engine's loop pays."""
    start = time.perf_counter()
    for i, event in enumerate(events):
        sink.append(event)
        if i % UNIT == UNIT - 1:
            sink.end_unit()
    sink.close()
    return time.perf_counter() - start


def _db_bytes(path: Path) -> int:
    """The SQLite file with its WAL and shared-memory files."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _bench_session(engine: Engine, config: dict[str, Any], backend: str) -> int:
    return create_session(engine, config=config, backend=backend, seeds={},
                          code_version=code_version())


def throughput(n_events: int, workdir: Path) -> dict[str, Any]:
    """Write rates, read-back and projection speed and bytes per event for `n_events`
    synthetic events."""
    events = synthetic_events(n_events)
    n = len(events)
    null_s = _feed(NullRecorder(), events)

    path = workdir / "group.db"
    engine = open_db(str(path), True)
    sid = _bench_session(engine, {"synthetic_events": n}, "synthetic")
    group_s = _feed(Recorder(engine, sid), events)
    engine.dispose()  # the last connection checkpoints the WAL into the main file
    size = _db_bytes(path)

    reader = open_db(str(path), False)
    start = time.perf_counter()
    stored = list(iter_events(reader, sid))
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    project(stored)
    fold_s = time.perf_counter() - start
    reader.dispose()

    # A commit per round is ~10x slower; a tenth of the events shows the rate.
    few = events[: max(UNIT, n // 10 // UNIT * UNIT)]
    engine = open_db(str(workdir / "per_unit.db"), True)
    sid = _bench_session(engine, {"synthetic_events": len(few)}, "synthetic")
    unit_s = _feed(Recorder(engine, sid, flush_events=1), few)
    engine.dispose()

    return {
        "events": n,
        "unit": UNIT,
        "group_commit": {
            "events_per_s": n / group_s,
            "overhead_us_per_event": (group_s - null_s) / n * 1e6,
        },
        "commit_per_unit": {
            "events": len(few),
            "rows_per_s": len(few) / unit_s,
            "transactions_per_s": len(few) / UNIT / unit_s,
        },
        "null_recorder_events_per_s": n / null_s,
        "read_events_per_s": n / read_s,
        "projection_events_per_s": n / fold_s,
        "db_bytes_per_event": size / n,
    }


# --- overhead on whole runs -----------------------------------------------------------


class TimedRecorder(Recorder):
    """A `Recorder` that adds up the seconds spent inside its own calls (`spent`): the
    recording cost of a run measured directly, without a baseline run to subtract."""

    def __init__(self, engine: Engine, session_id: int) -> None:
        start = time.perf_counter()
        super().__init__(engine, session_id)
        self.spent = time.perf_counter() - start

    def append(self, event: Event) -> None:
        """Buffer one event (timed)."""
        start = time.perf_counter()
        super().append(event)
        self.spent += time.perf_counter() - start

    def end_unit(self) -> None:
        """Close a unit, writing when a threshold is reached (timed)."""
        start = time.perf_counter()
        super().end_unit()
        self.spent += time.perf_counter() - start

    def flush(self) -> None:
        """Write every complete unit (timed)."""
        start = time.perf_counter()
        super().flush()
        self.spent += time.perf_counter() - start

    def close(self, status: SessionStatus = SessionStatus.FINISHED) -> None:
        """Write the rest and set the final status (timed)."""
        start = time.perf_counter()
        super().close(status)
        self.spent += time.perf_counter() - start


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


def _run_off(config: RunConfig, make_backend: BackendFactory) -> float:
    backend = make_backend()
    start = time.perf_counter()
    Session(config, NullRecorder(), backend=backend).run()
    return time.perf_counter() - start


def record_run(config: RunConfig, make_backend: BackendFactory, db: str,
               model_digest: str | None) -> RecordedRun:
    """Run `config` once into a new session of `db`, timing it and the recorder."""
    backend = make_backend()
    engine = open_db(db, create=True)  # schema creation is once per database: not timed
    try:
        start = time.perf_counter()
        sid = create_session(engine, config=config.to_dict(), backend=config.backend.value,
                             seeds={"seed": config.seed}, code_version=code_version(),
                             model_digest=model_digest)
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
                off.append(_run_off(config, make_backend))
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
    and `config` with the kernels that resolved. A probe backend asks for the questions
    first: the held-out functions they come from are parsed once per process (seconds),
    which is not what is measured."""
    from engine.hybrid.backend import TorchBackend
    from engine.hybrid.loader import load_checkpoint

    checkpoint = load_checkpoint(config.model)
    probe = TorchBackend(config, checkpoint)
    probe.question(0, 1, first=True)
    # Record what ran, not what was asked for ("auto"), as `run_session` does.
    resolved = config.replace(kernels=probe.kernels.value)
    return lambda: TorchBackend(resolved, checkpoint), probe.model_digest, resolved


def torch_overhead(sizes: Sizes, workdir: Path, opts: BenchOptions) -> dict[str, Any]:
    """Recording overhead on the real engine: the shipped models, MTP drafter, no audit."""
    import torch

    torch.set_num_threads(opts.threads)
    config = RunConfig(backend="torch", model=opts.model, draft_model=opts.draft_model,
                       drafter="mtp", turns=sizes.torch_turns, audit=False,
                       max_answer_tokens=sizes.torch_answer_tokens, seed=opts.seed)
    make, digest, config = torch_backends(config)
    result = overhead(config, make, sizes.repeat, workdir, opts, digest)
    result["threads"] = opts.threads
    return result


# --- report -------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def _overhead_rows(name: str, r: dict[str, Any]) -> list[tuple[str, str]]:
    off, on, paired = r["seconds_off"], r["seconds_on"], r["paired_overhead"]
    return [
        (f"{name}: run, recording off (median / min)",
         f"{off['median']:.3f} s / {off['min']:.3f} s"),
        (f"{name}: run, recording on (median / min)",
         f"{on['median']:.3f} s / {on['min']:.3f} s"),
        (f"{name}: paired wall overhead (median [min, max])",
         f"{_pct(paired['median'])} [{_pct(paired['min'])}, {_pct(paired['max'])}]"),
        (f"{name}: recorder's own time (median)",
         f"{r['recorder_s']['median']:.3f} s, {r['recorder_us_per_event']:.1f} us/event, "
         f"{r['events']:,} events"),
        (f"{name}: direct overhead (recorder / rest of run)",
         f"{_pct(r['direct_overhead']['median'])} "
         f"[{_pct(r['direct_overhead']['min'])}, {_pct(r['direct_overhead']['max'])}]"),
    ]


def table(data: dict[str, Any]) -> str:
    """The suite's markdown table."""
    tp = data["throughput"]
    rows = [
        ("recorder, group commit", f"{tp['group_commit']['events_per_s']:,.0f} events/s"),
        ("  recording cost", f"{tp['group_commit']['overhead_us_per_event']:.1f} us/event"),
        ("recorder, commit per round", f"{tp['commit_per_unit']['rows_per_s']:,.0f} rows/s "
         f"({tp['commit_per_unit']['transactions_per_s']:,.0f} tx/s)"),
        ("read back (iter_events)", f"{tp['read_events_per_s']:,.0f} events/s"),
        ("projection fold", f"{tp['projection_events_per_s']:,.0f} events/s"),
        ("database size", f"{tp['db_bytes_per_event']:.0f} bytes/event"),
        *_overhead_rows("sim", data["overhead"]["sim"]),
        *_overhead_rows("torch", data["overhead"]["torch"]),
    ]
    return md_table(["what", "result"], rows)


def plot(data: dict[str, Any], folder: Path) -> list[Path]:
    """Bars: direct and paired overhead for the sim and the real engine, with the goal."""
    fig, ax = new_figure()
    engines = ("sim", "torch")
    width = 0.38
    for j, (key, label) in enumerate((("direct_overhead", "recorder's own time"),
                                      ("paired_overhead", "paired wall time"))):
        xs = [i + (j - 0.5) * width for i in range(len(engines))]
        spreads = [data["overhead"][e][key] for e in engines]
        mids = [100 * s["median"] for s in spreads]
        errs = [[100 * (s["median"] - s["min"]) for s in spreads],
                [100 * (s["max"] - s["median"]) for s in spreads]]
        bars = ax.bar(xs, mids, width, yerr=errs, capsize=4, label=label)
        ax.bar_label(bars, fmt="%.1f%%", padding=2, fontsize="small")
    ax.axhline(100 * GOAL_FRACTION, color="red", linestyle="--", label="goal (real engine)")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(engines)), ["sim", "torch (real engine)"])
    ax.set_ylabel("recording overhead (% of run time)")
    ax.set_title("What recording costs (median, bars: min..max)")
    ax.legend()
    return save_figure(fig, folder / "recording_overhead")


def run(opts: BenchOptions) -> SuiteResult:
    """Measure everything, draw the plot, return the result."""
    sizes = QUICK if opts.quick else FULL
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        opts.log(f"recorder: throughput over {sizes.events:,} synthetic events")
        data: dict[str, Any] = {"throughput": throughput(sizes.events, workdir)}
        sim = sizes.sim.replace(seed=opts.seed)
        data["overhead"] = {
            "sim": overhead(sim, lambda: None, sizes.repeat, workdir, opts),
            "torch": torch_overhead(sizes, workdir, opts),
        }
    real = data["overhead"]["torch"]["direct_overhead"]["median"]
    paired = data["overhead"]["torch"]["paired_overhead"]
    data["goal_basis"] = (
        "the goal uses the recorder's own time (seconds inside Recorder calls, session "
        "creation to close) over the rest of the run, median of the on-runs; the paired "
        "wall-time overhead is reported beside it and is noisy on a shared CPU")
    data["env"] = {"python": platform.python_version(), "sqlalchemy": sqlalchemy.__version__,
                   "sqlite": sqlite3.sqlite_version, "machine": platform.machine()}
    goal = Goal(
        name="recording overhead, real engine",
        target=f"<= {100 * GOAL_FRACTION:.0f}%",
        measured=(f"{100 * real:.2f}% (recorder's own time; paired wall "
                  f"{_pct(paired['median'])}, range {_pct(paired['min'])}..."
                  f"{_pct(paired['max'])})"),
        met=real <= GOAL_FRACTION,
        command=COMMAND,
    )
    sessions = [data["overhead"][e]["bench_session"]["id"] for e in ("sim", "torch")]
    files = plot(data, opts.suite_dir("recorder"))
    return SuiteResult(name="recorder", data=data, table=table(data), goals=[goal],
                       files=files, sessions=sessions)
