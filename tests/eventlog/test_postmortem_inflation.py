"""PR 26320's acceptance inflation: a real 0.3.36 log (the fixed build, whose replays are
not counted) stays clean, and the same log as a build before the fix counts it (each
restore's replay adds its correction token to the accepted drafts) is named
`acceptance_inflation` at the turn and round of the first restore, with the engine's and
the rounds' numbers, and no counter mismatch left over; each build's own capture is judged
as its source says (0.3.21 also leaves the restored rounds' rejected drafts uncounted)."""

import gzip
import re

import pytest

from adapters.llama.builds.matrix import MATRIX, Exposure, facts
from eventlog.postmortem import Kind, Severity
from tests.adapters.llama.log.test_reader import FIXTURES, fixture_text
from tests.adapters.llama.test_postmortem import findings

_TASK = re.compile(r"\| task (\d+) \|")
_VERDICT = re.compile(r"accepted (\d+)/(\d+) draft tokens, new n_tokens")
_TOTALS = re.compile(r"draft acceptance = [\d.]+ \(\s*(\d+) accepted /\s*(\d+) generated\), "
                     r"mean len =\s*([\d.]+)")


def counted_before_the_fix(text: str) -> tuple[str, dict[int, int]]:
    """`text` with llama-server's counters as 0.3.24-0.3.30 print them: the verdict line
    of each round that restored says one more accepted draft, and each task's print_timing
    adds one accepted per restore. Returns it and the restores per task."""
    restores: dict[int, int] = {}
    pending: set[int] = set()
    lines = text.split("\n")
    for i, line in enumerate(lines):
        task_m = _TASK.search(line)
        if task_m is None:
            continue
        task = int(task_m.group(1))
        if "restoring speculative checkpoint" in line:
            restores[task] = restores.get(task, 0) + 1
            pending.add(task)
        elif (v := _VERDICT.search(line)) and task in pending:
            pending.discard(task)
            lines[i] = line[:v.start(1)] + str(int(v.group(1)) + 1) + line[v.end(1):]
        elif (t := _TOTALS.search(line)) and restores.get(task):
            acc, gen, mean = int(t.group(1)), int(t.group(2)), float(t.group(3))
            rounds = round(acc / (mean - 1))
            acc += restores[task]
            lines[i] = (line[:line.index("draft acceptance")] + f"draft acceptance = "
                        f"{acc / gen:.5f} ({acc:5d} accepted / {gen:5d} generated), mean "
                        f"len = {1 + acc / rounds:5.2f}")
    return "\n".join(lines), restores


def test_the_fixed_build_counts_no_replay() -> None:
    text = fixture_text("ngram-mod")
    assert "restoring speculative checkpoint" in text
    found = findings(text)
    assert Kind.ACCEPTANCE_INFLATION not in found
    assert Kind.ENGINE_COUNTER_MISMATCH not in found


def test_a_build_before_pr_26320_is_named() -> None:
    text, restores = counted_before_the_fix(fixture_text("ngram-mod"))
    found = findings(text)
    assert Kind.ENGINE_COUNTER_MISMATCH not in found, found.get(Kind.ENGINE_COUNTER_MISMATCH)
    inflation = found[Kind.ACCEPTANCE_INFLATION]
    n = inflation.numbers
    assert inflation.severity is Severity.ERROR
    assert inflation.turn == 1 and n["turn"] == 1 and inflation.round is not None
    assert n["restores"] == restores[0] == 3
    assert n["engine_accepted"] - n["rounds_accepted"] == 3
    assert n["turns_affected"] == len(restores) == 2
    assert n["restores_total"] == sum(restores.values())
    assert n["engine_generated"] == n["rounds_drafted"] and n["rejected_uncounted"] == 0
    rate = n["engine_accepted"] / n["engine_generated"]
    assert n["inflation_points"] == pytest.approx(
        100 * (rate - n["rounds_accepted"] / n["rounds_drafted"]), abs=0.01)
    assert n["inflation_points"] > 0


def test_a_surplus_that_is_not_the_restores_stays_a_counter_mismatch() -> None:
    text, _ = counted_before_the_fix(fixture_text("ngram-mod"))
    # One accepted draft more than the restores explain, in the first task's totals.
    more = re.sub(r"\(\s*(\d+) accepted", lambda m: f"({int(m.group(1)) + 1:5d} accepted",
                  text, count=1)
    found = findings(more)
    assert found[Kind.ENGINE_COUNTER_MISMATCH].turn == 1
    assert found[Kind.ACCEPTANCE_INFLATION].turn == 2  # the second task still is the bug's


BUILDS = FIXTURES / "builds"


@pytest.mark.parametrize("version", MATRIX)  # every build has its ngram-mod capture
def test_each_builds_own_capture_is_judged_as_its_source_says(version: str) -> None:
    """A real capture of each build (tools/capture_llama_fixtures.py): named where the
    build's source lacks PR 26320's discount, clean where it has it or cannot restore."""
    build = facts(version)
    assert build is not None
    text = gzip.decompress((BUILDS / version / "ngram-mod.log.gz").read_bytes()).decode(
        errors="surrogateescape")
    restores = text.count("restoring speculative checkpoint")
    found = findings(text)
    assert Kind.ENGINE_COUNTER_MISMATCH not in found, found.get(Kind.ENGINE_COUNTER_MISMATCH)
    if build.exposures["PR 26320"] is Exposure.ABSENT:  # 0.3.20: no speculation here
        assert restores == 0 and Kind.ACCEPTANCE_INFLATION not in found
        return
    assert restores > 0  # the scenario has what the incident needs
    if build.exposures["PR 26320"] is Exposure.FIXED:
        assert Kind.ACCEPTANCE_INFLATION not in found
        return
    assert build.exposures["PR 26320"] is Exposure.BUG
    n = found[Kind.ACCEPTANCE_INFLATION].numbers
    assert n["restores_total"] == restores  # every restore of this capture was replayed
    assert n["engine_accepted"] - n["rounds_accepted"] == n["restores"] > 0
    assert n["inflation_points"] > 0
    if version == "0.3.21":  # a restored round counted at its replay alone
        assert n["rounds_drafted"] - n["engine_generated"] == n["rejected_uncounted"] > 0
    else:
        assert n["engine_generated"] == n["rounds_drafted"]
