"""`specledger bench batching`: aggregate throughput against the number of slots under the
batched schedule (one target forward per scheduler step holds every slot's rows), for plain
decoding and for speculation under each correct rollback strategy, and the slot count at
which speculation stops paying.

Every point is one recorded session in the benchmark's log, read back from its events
(`points.py`): aggregate tok/s = the committed answer tokens of all slots over the
session's clock (simulated seconds on the sim, wall seconds on torch; torch also per CPU
second of the run, which the other jobs on a shared CPU do not inflate). Plain decoding also
runs under the sequential schedule, for what batching itself buys. Speculation "stops
paying" at the smallest slot count where its tok/s falls below plain decoding's at the same
slots, under the same schedule: the verify batch of every slot's drafts grows until the
forward is no longer bound by reading the weights, and the rejected drafts' compute is paid
by everyone.

The sim runs the Qwen3.5-27B on one H200 profile with the synthetic drafter (a set
acceptance), on to 64 slots; the real engine runs the shipped model on this machine with
ngram-mod and its MTP head (few turns, short answers: it is slow on two cores).
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine

from engine.config import RunConfig
from eventlog import open_db
from specbench.batching.plots import plot_throughput
from specbench.batching.points import PLAIN, Point, Rate, cpu, measure, stops_paying, wall
from specbench.common import BenchOptions, SuiteResult, group_by, md_table, timed
from specbench.strategies.points import CORRECT

SUITE = "batching"
SIM_PROFILE = "qwen3.5-27b-h200"
SIM_DRAFTERS = ("synthetic",)
# ngram-mod is free to run and pays on this CPU at one slot; the shipped MTP head costs a
# forward per draft and reaches little acceptance (docs: the drafters suite).
TORCH_DRAFTERS = ("ngram-mod", "mtp")
BATCHED, SEQUENTIAL = "batched", "sequential"
COMMAND = "specledger bench batching"


@dataclass(frozen=True)
class Grid:
    """One backend's runs: slot counts, the drafters speculation runs with, turns per
    slot, answer length (the sim's answer,
    torch's cap), draft length, the sim's first prompt and drafter acceptance, and how
    often torch repeats each point (the fastest repeat counts: load on a shared CPU only
    ever adds time)."""

    slots: tuple[int, ...]
    drafters: tuple[str, ...]
    turns: int
    answer_tokens: int
    draft: int
    prompt_tokens: int = 512
    acceptance: float = 0.7
    repeats: int = 1


def sim_grid(quick: bool) -> Grid:
    """The sim's grid: 1..64 slots (past 8, where the cheap strategies still pay, to find
    where they stop), two turns of 512-token answers; quick: 1 and 2 slots."""
    if quick:
        return Grid((1, 2), SIM_DRAFTERS, turns=1, answer_tokens=32, draft=4, prompt_tokens=64)
    return Grid((1, 2, 4, 8, 16, 32, 64), SIM_DRAFTERS, turns=2, answer_tokens=512, draft=4)


def torch_grid(quick: bool) -> Grid:
    """The real engine's grid: 1..8 slots, two turns of answers cut at 48 tokens, best of
    three; quick: 1 and 2 slots, one turn of 8 tokens."""
    if quick:
        return Grid((1, 2), TORCH_DRAFTERS, turns=1, answer_tokens=8, draft=4)
    return Grid((1, 2, 4, 8), TORCH_DRAFTERS, turns=2, answer_tokens=48, draft=4, repeats=3)


def _runs(grid: Grid) -> list[tuple[str, str, str, int]]:
    """(drafter, variant, schedule, slots) of every run: plain decoding batched and
    sequential, and each strategy with each drafter batched."""
    return [(d, v, sched, n) for n in grid.slots
            for d, v, sched in [("none", PLAIN, BATCHED), ("none", PLAIN, SEQUENTIAL),
                                *((d, v, BATCHED) for d in grid.drafters for v in CORRECT)]]


def run_sim(opts: BenchOptions, grid: Grid, log: Engine) -> list[Point]:
    """Every variant x slot count on the sim's 27B / H200 profile."""
    runs = _runs(grid)
    opts.log(f"batching: sim {SIM_PROFILE}: slots {grid.slots}, {len(runs)} runs, "
             f"{grid.turns} turn(s) of {grid.answer_tokens} tokens")
    points = []
    for drafter, variant, schedule, n in runs:
        config = RunConfig(
            backend="sim", profile=SIM_PROFILE, schedule=schedule, slots=n, turns=grid.turns,
            drafter=drafter, acceptance=grid.acceptance,
            strategy="checkpoint" if variant == PLAIN else variant, draft_max=grid.draft,
            prompt_tokens=grid.prompt_tokens, answer_tokens=grid.answer_tokens,
            seed=opts.seed)
        points.append(measure(config, opts.db, log))
    return points


def run_torch(opts: BenchOptions, grid: Grid, log: Engine) -> list[Point]:
    """Every variant x slot count on the shipped model (MTP drafter), each `repeats` times,
    the repeats interleaved so that a burst of load hits every variant."""
    import torch

    from engine.session import Session
    from eventlog import NullRecorder

    torch.set_num_threads(opts.threads)

    def config(drafter: str, variant: str, schedule: str, n: int, tokens: int) -> RunConfig:
        return RunConfig(
            backend="torch", schedule=schedule, slots=n, turns=grid.turns, drafter=drafter,
            strategy="checkpoint" if variant == PLAIN else variant, draft_max=grid.draft,
            max_answer_tokens=tokens, audit=False, model=opts.model,
            draft_model=opts.draft_model, seed=opts.seed, device=opts.device,
            threads=opts.threads)

    if not opts.quick:  # an unrecorded warm-up: first-call costs skip the first point
        for drafter in grid.drafters:
            Session(config(drafter, "checkpoint", BATCHED, 2, 8), NullRecorder()).run()
    runs = _runs(grid)
    opts.log(f"batching: torch: slots {grid.slots}, {len(runs)} runs, {grid.turns} turn(s) "
             f"of up to {grid.answer_tokens} tokens, {grid.repeats} repeat(s), "
             f"{opts.threads} thread(s)")
    points = []
    for r in range(grid.repeats):
        for drafter, variant, schedule, n in runs:
            opts.log(f"batching: torch {drafter} {variant} {schedule} {n} slot(s), "
                     f"repeat {r + 1}/{grid.repeats}")
            points.append(measure(config(drafter, variant, schedule, n, grid.answer_tokens),
                                  opts.db, log))
    return points


def best(points: Sequence[Point], rate: Rate) -> list[Point]:
    """Each (profile, schedule, drafter, variant, slots)'s fastest repeat by `rate`."""
    return [max(repeats, key=rate) for repeats in group_by(
        points, lambda pt: (pt.profile, pt.schedule, pt.drafter, pt.variant, pt.slots)).values()]


def by_drafter(points: Sequence[Point], drafters: Sequence[str]) -> dict[str, list[Point]]:
    """Per drafter, its batched points with plain decoding's (both schedules)."""
    return {d: [pt for pt in points if pt.drafter in (d, "none")] for d in drafters}


def paying_by_drafter(groups: dict[str, list[Point]], rate: Rate = wall
                      ) -> dict[str, dict[str, str]]:
    """Per drafter, where each strategy stops paying against batched plain decoding."""
    return {d: stops_paying([pt for pt in pts if pt.schedule == BATCHED], rate)
            for d, pts in groups.items()}


def _table(points: Sequence[Point], paying: dict[str, str], rate: Rate) -> str:
    """A row per slot count: plain (sequential and batched) and each strategy's aggregate
    `rate`, each strategy's ratio to batched plain; then where each stops paying."""
    at = {(pt.schedule, pt.variant, pt.slots): pt for pt in points}
    rows: list[list[Any]] = []
    for n in sorted({pt.slots for pt in points}):
        plain = rate(at[(BATCHED, PLAIN, n)])
        row: list[Any] = [n, f"{rate(at[(SEQUENTIAL, PLAIN, n)]):.1f}", f"{plain:.1f}"]
        for v in CORRECT:
            r = rate(at[(BATCHED, v, n)])
            row.append(f"{r:.1f} ({r / plain:.2f}x)")
        row.append(f"{at[(BATCHED, PLAIN, n)].mean_tokens:.1f} / "
                   f"{at[(BATCHED, CORRECT[0], n)].mean_tokens:.1f}")
        rows.append(row)
    rows.append(["stops paying at", "", "", *(f"**{paying[v]}** slots" for v in CORRECT), ""])
    return md_table(["slots", "plain, sequential", "plain, batched",
                     *(f"{v}, batched" for v in CORRECT),
                     "tokens per forward (plain / speculative)"], rows)


def _acceptance(points: Sequence[Point]) -> str:
    """The speculative points' accepted / drafted, as a range."""
    acc = [pt.acceptance for pt in points if pt.variant != PLAIN]
    lo, hi = min(acc), max(acc)
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}"


def run(opts: BenchOptions) -> SuiteResult:
    """Run the sim and torch grids, write the plot, report where speculation stops paying."""
    folder = opts.suite_dir(SUITE)
    log = open_db(opts.db, create=True)
    sgrid, tgrid = sim_grid(opts.quick), torch_grid(opts.quick)
    sim, sim_wall = timed(run_sim, opts, sgrid, log)
    real, torch_wall = timed(run_torch, opts, tgrid, log)
    groups = {"sim": by_drafter(best(sim, wall), sgrid.drafters),
              "torch": by_drafter(best(real, wall), tgrid.drafters),
              "torch_cpu": by_drafter(best(real, cpu), tgrid.drafters)}
    paying = {backend: paying_by_drafter(g, cpu if backend == "torch_cpu" else wall)
              for backend, g in groups.items()}
    files = plot_throughput(
        {**{f"sim: {SIM_PROFILE}, {d}": (pts, wall) for d, pts in groups["sim"].items()},
         **{f"torch: shipped model, {d} (CPU s)": (pts, cpu)
            for d, pts in groups["torch_cpu"].items()}},
        folder / "throughput")
    table = [
        "Aggregate tok/s (committed answer tokens of all slots / the session's clock; torch "
        "also per CPU second), each strategy's ratio to batched plain decoding at the same "
        "slots, and the smallest slot count at which it falls below plain.", ""]
    for d, pts in groups["sim"].items():
        table += [f"### sim: {SIM_PROFILE}, {d} drafter (accepted/drafted {_acceptance(pts)}, "
                  f"draft {sgrid.draft}), {sgrid.turns} turn(s) of {sgrid.answer_tokens}-token "
                  "answers, simulated seconds", "", _table(pts, paying["sim"][d], wall), ""]
    for key, rate, clock in (("torch", wall, "wall seconds"),
                             ("torch_cpu", cpu, "CPU seconds")):
        for d, pts in groups[key].items():
            table += [f"### torch: {opts.model}, {d} drafter (accepted/drafted "
                      f"{_acceptance(pts)}, draft {tgrid.draft}), {tgrid.turns} turn(s) of "
                      f"answers cut at {tgrid.answer_tokens} tokens, {opts.threads} "
                      f"thread(s), {clock}, best of {tgrid.repeats}", "",
                      _table(pts, paying[key][d], rate), ""]
    data = {
        "definitions": {
            "tok_s": "committed answer tokens of all slots (turns' generated tokens) / the "
                     "session's clock (latest event time: simulated s on sim, wall s on "
                     "torch), prefill included",
            "tok_cpu_s": "the same tokens / the process's CPU seconds during the run "
                         "(recording included, backend construction not); torch only",
            "stops_paying": "smallest slots at which the strategy's batched tok/s falls "
                            "below batched plain decoding's at the same slots ('> N': never "
                            "up to N)",
            "mean_tokens": "tokens per shared forward (batch_tokens), mean over forwards",
        },
        "grids": {"sim": asdict(sgrid), "torch": asdict(tgrid)},
        "profile": SIM_PROFILE, "model": opts.model, "threads": opts.threads,
        "device": opts.device, "wall_s": {"sim": sim_wall, "torch": torch_wall},
        "stops_paying": paying,
        "sim": [pt.to_dict() for pt in sim], "torch": [pt.to_dict() for pt in real],
    }
    opts.log(f"batching: sim {sim_wall:.1f} s, torch {torch_wall:.1f} s")
    return SuiteResult(SUITE, data, "\n".join(table).rstrip() + "\n", files=files,
                       sessions=[pt.session for pt in (*sim, *real)])
