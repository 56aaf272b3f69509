"""The suites sit above the library: no library module imports `specbench`, except the
`bench` command, and that one only inside its functions (so importing the library never
loads a suite)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("fsm", "eventlog", "engine", "adapters", "speckernels", "viz", "specledger")
DISPATCHER = ROOT / "specledger" / "cli" / "bench.py"


def _imports_specbench(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "specbench"
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "specbench" for a in node.names)
    return False


def test_the_library_imports_no_suite() -> None:
    found = []
    for package in LIBRARY:
        assert (ROOT / package).is_dir(), f"{package}: no such package"
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            at_top = [n for n in tree.body if _imports_specbench(n)]
            anywhere = [n for n in ast.walk(tree) if _imports_specbench(n)]
            if path == DISPATCHER:
                assert anywhere and not at_top, "the bench command imports specbench lazily"
            elif anywhere:
                found.append(str(path.relative_to(ROOT)))
    assert found == []
