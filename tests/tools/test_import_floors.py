"""tools/import_floors.py: the tree as it stands has no arrow up its floors and no circle of
modules, and the tool sees each kind of break (a late import counts, an annotation-only one
does not, the bench door only late)."""

import importlib.util
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).parents[2]
SPEC = importlib.util.spec_from_file_location("import_floors", ROOT / "tools" / "import_floors.py")
assert SPEC is not None and SPEC.loader is not None
TOOL = importlib.util.module_from_spec(SPEC)
sys.modules["import_floors"] = TOOL  # its dataclasses look their module up by name
SPEC.loader.exec_module(TOOL)


def _tree(tmp_path: Path, files: dict[str, str]) -> list:
    for name, source in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return TOOL.arrows(TOOL.modules(tmp_path))


def test_the_tree_has_no_arrow_up_and_no_circle() -> None:
    found = TOOL.arrows(TOOL.modules())
    assert TOOL.arrows_up(found) == []
    assert TOOL.circles(found) == []
    assert TOOL.main(["--check"]) == 0


def test_every_package_of_the_tree_has_a_floor() -> None:
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages == {name for name, _ in TOOL.FLOORS}


def test_an_import_of_a_higher_floor_is_an_arrow_up_late_or_not(tmp_path: Path) -> None:
    found = _tree(tmp_path, {
        "fsm/__init__.py": "",
        "fsm/a.py": "def f():\n    import engine.b\n",
        "engine/__init__.py": "",
        "engine/b.py": "from fsm import a\n",
    })
    assert [(a.source, a.target, a.late) for a in TOOL.arrows_up(found)] == [
        ("fsm.a", "engine.b", True)]


def test_the_bench_door_opens_late_only(tmp_path: Path) -> None:
    files = {"specledger/__init__.py": "", "specbench/__init__.py": "",
             "specledger/cli/bench.py": "def run():\n    import specbench\n"}
    assert TOOL.arrows_up(_tree(tmp_path, files)) == []
    files["specledger/cli/bench.py"] = "import specbench\n"
    assert len(TOOL.arrows_up(_tree(tmp_path, files))) == 1


def test_a_late_import_closes_a_circle_an_annotation_does_not(tmp_path: Path) -> None:
    files = {
        "engine/__init__.py": "",
        "engine/base.py": "def make():\n    from engine.one import One\n",
        "engine/one.py": "from engine.base import make\n",
    }
    assert TOOL.circles(_tree(tmp_path, files)) == [["engine.base", "engine.one"]]
    files["engine/base.py"] = ("from typing import TYPE_CHECKING\n"
                               "if TYPE_CHECKING:\n    from engine.one import One\n")
    assert TOOL.circles(_tree(tmp_path, files)) == []


def test_from_a_package_import_a_module_points_at_the_module(tmp_path: Path) -> None:
    found = _tree(tmp_path, {"fsm/__init__.py": "", "fsm/a.py": "",
                             "fsm/b.py": "from fsm import a\nimport fsm.a.missing\n"})
    assert {(a.source, a.target) for a in found} == {("fsm.b", "fsm.a")}


@given(st.integers(2, 12).flatmap(lambda n: st.tuples(
    st.just(n), st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))))))
def test_circles_are_exactly_the_back_edges_closing_a_path(drawn: tuple[int, set]) -> None:
    """Edges from a higher to a lower number never close a circle; one edge back from the
    lowest to the highest node of a path does, and the circle holds the whole path."""
    n, pairs = drawn
    down = [TOOL.Arrow(f"m{max(a, b)}", f"m{min(a, b)}", False) for a, b in pairs if a != b]
    assert TOOL.circles(down) == []
    path = [TOOL.Arrow(f"m{i + 1}", f"m{i}", False) for i in range(n - 1)]
    back = TOOL.Arrow("m0", f"m{n - 1}", True)
    circle = TOOL.circles([*down, *path, back])
    assert circle == [sorted(f"m{i}" for i in range(n))]


def test_docs_architecture_draws_the_floors_as_they_are() -> None:
    """docs/architecture.md's table is the tool's: a new arrow between packages means
    redrawing it (`python tools/import_floors.py`)."""
    table = TOOL.render(TOOL.arrows(TOOL.modules()))
    assert table in (ROOT / "docs" / "architecture.md").read_text()
