"""`specledger bench incidents`: every known llama.cpp incident's scenario on every built
build of the matrix, recorded, read by the postmortem, and the table incident x build.

Per build (adapters/llama/builds/matrix.py, oldest first): a build not in the cache is `not built`
(build it with `specledger llama build VERSION`); an incident whose code the build lacks
(builds.json's exposure `absent`, or the build refuses the scenario's drafter) is
`absent in this build`; every other scenario runs (`specledger run --backend llama
--llama-build VERSION ...`, adapters/llama/builds/scenarios.py), scenarios of the same
settings share one session, and the postmortem of the session judges the cell
(specbench/incidents/cells.py): `named`, `clean`, `not reproducible on CPU (why)`, or
`failed`. Each cell names its sessions and says where the measurement disagrees with what
the build's source says.

`quick`: the build `--llama-build` names and the PR 26320 scenario at smoke size only.
Writes results.json, results.md and incidents.md (the table and every cell's why).
"""

import time
from dataclasses import dataclass
from typing import Any

from adapters.llama.builds.incidents import INCIDENTS, Incident
from adapters.llama.builds.matrix import MATRIX, Build, facts
from adapters.llama.builds.scenarios import (
    QUICK,
    SCENARIOS,
    Scenario,
    Verdict,
    absent_reason,
    expected,
    quick_scenario,
)
from adapters.llama.errors import LlamaError
from adapters.llama.server.options import BuildLacksDrafterError
from adapters.llama.server.paths import built
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.files import write_file
from eventlog import open_db
from eventlog.postmortem import postmortem_session
from eventlog.reader import scan_events
from fsm.states import Trigger
from specbench.common import BenchOptions, Goal, SuiteResult, md_table, timed
from specbench.incidents.cells import Cell, judge

SUITE = "incidents"
COMMAND = "specledger bench incidents"


@dataclass(frozen=True)
class Outcome:
    """One recorded run: its session, postmortem and turns; or why it did not run
    (`refused`: the build refuses the drafter; `error`: the run failed)."""

    session: int | None = None
    postmortem: dict[str, Any] | None = None
    turns: tuple[dict[str, Any], ...] = ()
    refused: str | None = None
    error: str | None = None


def record(scenario: Scenario, build: str, opts: BenchOptions) -> Outcome:
    """Run and record one scenario on `build`; its postmortem."""
    config = scenario.config(build, model=opts.model, draft_model=opts.draft_model)
    try:
        return _recorded(config, opts)
    except BuildLacksDrafterError as exc:
        return Outcome(refused=str(exc))
    except (LlamaError, ConfigError) as exc:
        return Outcome(error=f"{type(exc).__name__}: {exc}")


def _recorded(config: RunConfig, opts: BenchOptions) -> Outcome:
    from specledger.runs.llama import run_llama

    done = run_llama(config, opts.db)
    sid = done.session.session_id
    engine = open_db(opts.db, create=False)
    post = postmortem_session(engine, sid)
    # The turns as recorded: END_TURN's metrics name what the log could not measure.
    ends = scan_events(engine, sid, triggers={Trigger.END_TURN})
    return Outcome(sid, post.to_dict(), tuple(ev.payload["metrics"] for ev in ends))


def cell(incident: Incident, scenario: Scenario, build: Build, outcome: Outcome) -> Cell:
    """The cell of one incident on one build from its scenario's run."""
    exp = expected(build, incident)
    if outcome.refused is not None:
        return Cell(Verdict.ABSENT, f"the build refuses the scenario: {outcome.refused}", exp)
    if outcome.error is not None or outcome.session is None or outcome.postmortem is None:
        return Cell(Verdict.FAILED, outcome.error or "no session", exp)
    return judge(incident, scenario, exp, outcome.session, outcome.postmortem,
                 list(outcome.turns))


def run_build(version: str, incidents: tuple[Incident, ...], opts: BenchOptions,
              step: list[int], total: int) -> dict[str, Cell]:
    """Every incident's cell on one build (`step`: the run counter, for progress)."""
    build = facts(version)
    if build is None:
        raise ConfigError(f"bench incidents: {version} has no facts in builds.json "
                          f"(tools/llama_matrix.py writes them)")
    if not built(version):
        opts.log(f"{SUITE}: {version} is not built (specledger llama build {version}): "
                 f"skipped")
        return {i.key: Cell(Verdict.NOT_BUILT, f"no llama-server {version} in the cache",
                            expected(build, i)) for i in incidents}
    cells: dict[str, Cell] = {}
    runs: dict[tuple[object, ...], Outcome] = {}
    for incident in incidents:
        if expected(build, incident) is Verdict.ABSENT:
            cells[incident.key] = Cell(Verdict.ABSENT, absent_reason(incident, build),
                                       Verdict.ABSENT)
            continue
        scenario = SCENARIOS[incident.key]
        if opts.quick:
            scenario = quick_scenario(scenario)
        if scenario.run_key not in runs:
            step[0] += 1
            opts.log(f"{SUITE}: run {step[0]}/{total}: {version} {incident.key}: "
                     f"{scenario.command(version)}")
            done, seconds = timed(record, scenario, version, opts)
            runs[scenario.run_key] = done
            opts.log(f"{SUITE}: {version} {incident.key}: "
                     f"{'session ' + str(done.session) if done.session else 'no session'}"
                     f" in {seconds:.0f} s")
        cells[incident.key] = cell(incident, scenario, build, runs[scenario.run_key])
    return cells


def planned_runs(versions: tuple[str, ...], incidents: tuple[Incident, ...]) -> int:
    """How many runs the suite will make (distinct scenarios per built build)."""
    total = 0
    for version in versions:
        build = facts(version)
        if build is None or not built(version):
            continue
        total += len({SCENARIOS[i.key].run_key for i in incidents
                      if expected(build, i) is not Verdict.ABSENT})
    return total


def table(cells: dict[str, dict[str, Cell]], versions: tuple[str, ...]) -> str:
    """Incident x build: each cell's verdict and sessions."""
    header = ["incident", "finding", *[_label(v) for v in versions]]
    rows = [[f"{i.key}: {i.title}", f"`{i.finding}`",
             *[cells[v][i.key].short() for v in versions]] for i in INCIDENTS]
    return md_table(header, rows)


def _label(version: str) -> str:
    build = facts(version)
    return build.label() if build is not None else version


def details(cells: dict[str, dict[str, Cell]], versions: tuple[str, ...]) -> str:
    """Every cell's why, and the command of each scenario."""
    out = ["## Each cell", ""]
    for i in INCIDENTS:
        s = SCENARIOS[i.key]
        out += [f"### {i.key}: {i.title}", "", f"Scenario: `{s.command('VERSION')}` "
                f"({s.why}). Fix: {i.fix}.", ""]
        out += [f"- {v}: {cells[v][i.key].short()}: {cells[v][i.key].why}" for v in versions]
        out.append("")
    return "\n".join(out)


def fixed_later(cells: dict[str, dict[str, Cell]], versions: tuple[str, ...]) -> list[str]:
    """The incidents named on a build and clean on a later one whose source has the fix."""
    out = []
    for i in INCIDENTS:
        row = [cells[v][i.key] for v in versions]
        named = [n for n, c in enumerate(row) if c.verdict is Verdict.NAMED]
        if named and any(c.verdict is Verdict.CLEAN and c.expected is Verdict.CLEAN
                         for c in row[named[0] + 1:]):
            out.append(i.key)
    return out


def reproduced_goal(cells: dict[str, dict[str, Cell]], versions: tuple[str, ...],
                    quick: bool) -> Goal:
    """The issue's bar: at least two incidents named in a build that has the bug and
    absent from a later build that has the fix, on the same scenario; and how many
    measured cells agree with what the builds' sources say."""
    measured = [c for v in versions for c in cells[v].values()
                if c.verdict not in (Verdict.NOT_BUILT, Verdict.NOT_RUN, Verdict.FAILED)]
    agree = sum(c.as_expected for c in measured)
    both = fixed_later(cells, versions)
    return Goal(name="known llama.cpp incidents reproduced and named in the builds that "
                     "have them, clean in a later build with the fix (same scenario)",
                target=">= 2 incidents" if not quick else ">= 2 incidents (full run only)",
                measured=f"{len(both)} ({', '.join(both) or 'none'}); {agree}/"
                         f"{len(measured)} measured cells as the builds' source says",
                met=len(both) >= 2 or quick, command=COMMAND)


def run(opts: BenchOptions) -> SuiteResult:
    """Run the matrix (quick: one build, one scenario), write the table."""
    versions = (opts.llama_build,) if opts.quick else MATRIX
    chosen = tuple(i for i in INCIDENTS if not opts.quick or i.key in QUICK)
    total = planned_runs(versions, chosen)
    opts.log(f"{SUITE}: {len(chosen)} incident(s) x {len(versions)} build(s): {total} run(s)")
    t = time.perf_counter()
    step = [0]
    cells: dict[str, dict[str, Cell]] = {}
    for version in versions:
        measured = run_build(version, chosen, opts, step, total)
        build = facts(version)
        cells[version] = {i.key: measured.get(i.key) or Cell(
            Verdict.NOT_RUN, "left out of the smoke run",
            expected(build, i) if build is not None else Verdict.NOT_RUN) for i in INCIDENTS}
    wall = time.perf_counter() - t
    text = table(cells, versions)
    quick = " Quick run: one build, one scenario at smoke size." if opts.quick else ""
    intro = (f"Each known incident's scenario on each build of the matrix, recorded and read "
             f"by `specledger postmortem`: **named** (the finding, at its turn and round, "
             f"with its numbers), clean, not reproducible on CPU (with the evidence), absent "
             f"in this build (no such code or drafter), not built. sN is the session in "
             f"the benchmark's log; a cell says where the measurement disagrees with the "
             f"build's source (builds.json).{quick}")
    folder = opts.suite_dir(SUITE)
    doc = "\n".join(["# Incidents x builds", "", intro, "", text, "",
                     details(cells, versions)])
    md = folder / "incidents.md"
    write_file(md, doc)
    goal = reproduced_goal(cells, versions, opts.quick)
    sessions = sorted({s for v in versions for c in cells[v].values() for s in c.sessions})
    data = {"builds": list(versions), "wall_s": wall,
            "scenarios": {k: {"command": s.command("VERSION"), "why": s.why}
                          for k, s in SCENARIOS.items()},
            "cells": {v: {k: c.to_dict() for k, c in cells[v].items()} for v in versions}}
    opts.log(f"{SUITE}: {step[0]} run(s) in {wall:.0f} s")
    return SuiteResult(SUITE, data, f"{intro}\n\n{text}", goals=[goal], files=[md],
                       sessions=sessions)
