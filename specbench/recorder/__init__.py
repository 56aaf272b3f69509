"""Suite `recorder`: what recording costs.

Four numbers: the recorder's write rate on SQLite (group commit against a commit per
round), read-back and projection speed, database bytes per event, and the overhead of
recording on whole runs of the sim and of the real engine (the torch backend with the
shipped models). The overhead is measured twice: as paired wall times of the same run
with `NullRecorder` and with `Recorder` (alternating, because a shared 2-core machine is
noisy), and as the time spent inside the recorder's own calls, which needs no baseline
run and is far less noisy. The goal uses the second.

The throughput measurement is in `throughput.py`, the overhead on whole runs in
`overhead.py`; this module sizes them, runs them and reports.
"""

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from specbench.common import (
    BenchOptions,
    Goal,
    SuiteResult,
    ledger_env,
    md_table,
    new_figure,
    save_figure,
)
from specbench.recorder.overhead import overhead, torch_backends
from specbench.recorder.throughput import throughput

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


def torch_overhead(sizes: Sizes, workdir: Path, opts: BenchOptions) -> dict[str, Any]:
    """Recording overhead on the real engine: the shipped models, MTP drafter, no audit."""
    import torch

    torch.set_num_threads(opts.threads)
    config = RunConfig(backend="torch", model=opts.model, draft_model=opts.draft_model,
                       device=opts.device,
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
        ("read back (scan_events)", f"{tp['read_events_per_s']:,.0f} events/s"),
        ("projection fold", f"{tp['projection_events_per_s']:,.0f} events/s"),
        ("database size", f"{tp['db_bytes_per_event']:.0f} bytes/event"),
        ("one transition: RoundMachine.fire, event built",
         f"{tp['fire']['round_machine_us']:.1f} us"),
        ("one transition: bare `transitions` trigger", f"{tp['fire']['transitions_us']:.1f} us"),
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
    data["env"] = ledger_env()
    goal = Goal(
        name="recording overhead, real engine",
        target=f"<= {100 * GOAL_FRACTION:.0f}%",
        measured=(f"{100 * real:.2f}% (recorder's own time; paired wall "
                  f"{_pct(paired['median'])}, range {_pct(paired['min'])}..."
                  f"{_pct(paired['max'])})"
                  + (" (quick run: not to quote)" if opts.quick else "")),
        met=real <= GOAL_FRACTION,
        command=COMMAND,
    )
    sessions = [data["overhead"][e]["bench_session"]["id"] for e in ("sim", "torch")]
    files = plot(data, opts.suite_dir("recorder"))
    return SuiteResult(name="recorder", data=data, table=table(data), goals=[goal],
                       files=files, sessions=sessions)
