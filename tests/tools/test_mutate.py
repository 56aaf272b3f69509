"""tools/mutate.py's table stays true to the code: every mutation applies (each snippet
found exactly once in its file), names tests that exist, and has a name of its own; a
snippet the code no longer holds is an error, never a skip; pytest's exit statuses read
as outcomes."""

import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SPEC = importlib.util.spec_from_file_location("mutate", ROOT / "tools" / "mutate.py")
assert SPEC is not None and SPEC.loader is not None
TOOL = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(TOOL)


@pytest.mark.parametrize("mutation", TOOL.MUTATIONS, ids=lambda mu: mu.name)
def test_each_mutation_applies_and_names_tests_that_exist(mutation: object) -> None:
    text = (ROOT / mutation.file).read_text()
    changed = TOOL.mutated(text, mutation)
    assert changed != text
    paths = [t.split("::")[0] for t in mutation.tests
             if not t.startswith("-") and t not in TOOL._k_args(mutation)]
    assert paths and all((ROOT / p).exists() for p in paths), paths


def test_names_are_unique() -> None:
    names = [mu.name for mu in TOOL.MUTATIONS]
    assert len(names) == len(set(names))


def test_a_stale_snippet_is_an_error() -> None:
    mu = TOOL.MUTATIONS[0]
    stale = replace(mu, edits=(("no such code", "x"),))
    with pytest.raises(TOOL.TableError, match="holds its snippet 0 times"):
        TOOL.mutated((ROOT / mu.file).read_text(), stale)


def test_exit_statuses() -> None:
    assert [TOOL.outcome_of(s) for s in (0, 1, 2, 4, 5, None)] == [
        TOOL.Outcome.SURVIVED, TOOL.Outcome.KILLED, TOOL.Outcome.ERROR, TOOL.Outcome.ERROR,
        TOOL.Outcome.ERROR, TOOL.Outcome.TIMEOUT]
