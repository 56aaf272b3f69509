"""The tree drawn from its imports: which package sits on which floor, the arrows between
them, and what breaks the drawing (an arrow up the floors, a circle of modules).

Every `import` in the project's packages counts, at a module's top or inside a function
(a late import is still a dependency, only a cheaper one), except those under
`if TYPE_CHECKING:` (annotations, never run). Each package is a floor of its own and may
import from itself and the floors below; the one arrow up it may draw is a door in `DOORS`,
and that only inside a function (`specledger bench` loads the suites it dispatches to,
and nothing else does).

    python tools/import_floors.py            the floors, each package's job and its arrows
    python tools/import_floors.py --dot      the same as a graphviz digraph
    python tools/import_floors.py --check    exit 1, naming each, on an arrow up or a circle
"""

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]

FLOORS: tuple[tuple[str, str], ...] = (
    ("fsm", "the round state machine, the event record, the invariants as pure checks"),
    ("speckernels", "the GDN and conv kernels (Triton, and the torch reference)"),
    ("eventlog", "stores, reads back, folds, diffs and judges recorded sessions"),
    ("engine", "runs conversations behind one Backend protocol: torch, sim, drafters"),
    ("viz", "graphs of a session's events (networkx, graphviz)"),
    ("adapters", "drives and reads llama.cpp and vLLM into recorded sessions"),
    ("specledger", "the CLI, re-execution, scenarios, reports and exports"),
    ("specbench", "the benchmark suites behind `specledger bench`"),
)
"""The packages, lowest floor first, each with its job in a line (docs/architecture.md)."""

DOORS = {("specledger.cli.bench", "specbench")}
"""The arrows up the floors the tree allows: (importing module, package it may load late)."""


@dataclass(frozen=True)
class Arrow:
    """One import: `source` module imports `target` (a module of the tree), `late` when
    inside a function."""

    source: str
    target: str
    late: bool


def package_of(module: str) -> str:
    """The floor's package a module belongs to (its first name)."""
    return module.split(".")[0]


def floor(module: str) -> int:
    """The floor of `module`'s package (0 the lowest)."""
    return [name for name, _ in FLOORS].index(package_of(module))


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the floors' packages by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for name, _ in FLOORS:
        for path in sorted((root / name).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(node: ast.AST, late: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, late
        return
    if isinstance(node, ast.If) and _is_type_checking(node):
        children: list[ast.AST] = list(node.orelse)
    else:
        children = list(ast.iter_child_nodes(node))
    late = late or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
    for child in children:
        yield from _imports(child, late)


def _targets(node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level or not node.module:
            return
        names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known
                 else node.module for a in node.names]
    for name in names:
        while name and name not in known:  # `import a.b.c` of a function's module: a.b
            name = name.rpartition(".")[0]
        if name:
            yield name


def arrows(known: dict[str, Path]) -> list[Arrow]:
    """Every import between the tree's modules, once per (source, target, late)."""
    found: set[Arrow] = set()
    for module, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        for node, late in _imports(tree, False):
            found.update(Arrow(module, t, late) for t in _targets(node, known) if t != module)
    return sorted(found, key=lambda a: (a.source, a.target, a.late))


def arrows_up(found: list[Arrow]) -> list[Arrow]:
    """The arrows that climb to a higher floor, less the doors (late ones only)."""
    return [a for a in found if floor(a.target) > floor(a.source)
            and not (a.late and (a.source, package_of(a.target)) in DOORS)]


def circles(found: list[Arrow]) -> list[list[str]]:
    """The circles of modules (strongly connected components of two or more), each sorted."""
    graph = nx.DiGraph([(a.source, a.target) for a in found])
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def package_arrows(found: list[Arrow]) -> dict[tuple[str, str], int]:
    """How many module imports go from each package to each other package."""
    counts: dict[tuple[str, str], int] = {}
    for a in found:
        pair = (package_of(a.source), package_of(a.target))
        if pair[0] != pair[1]:
            counts[pair] = counts.get(pair, 0) + 1
    return counts


def render(found: list[Arrow], dot: bool = False) -> str:
    """The floors as a markdown table, highest first (each package's job and the packages
    it imports, highest first), or as a graphviz digraph (edges labelled with how many
    module imports they stand for)."""
    counts = package_arrows(found)
    if dot:
        lines = ["digraph floors {", "  rankdir=TB;"]
        lines += [f'  "{s}" -> "{t}" [label={n}];' for (s, t), n in sorted(counts.items())]
        return "\n".join([*lines, "}"])
    rows = ["| floor | package | its job | imports |", "|---|---|---|---|"]
    for level, (name, job) in reversed(list(enumerate(FLOORS))):
        below = sorted((t for s, t in counts if s == name), key=floor, reverse=True)
        rows.append(f"| {level} | `{name}/` | {job} | "
                    + (", ".join(f"`{t}`" for t in below) or "nothing") + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Print the floors (or the digraph), or check them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dot", action="store_true", help="a graphviz digraph of packages")
    parser.add_argument("--check", action="store_true", help="exit 1 on an arrow up or a circle")
    args = parser.parse_args(argv)
    known = modules()
    found = arrows(known)
    if args.check:
        bad = [f"arrow up: {a.source} -> {a.target}{' (late)' if a.late else ''}"
               for a in arrows_up(found)]
        bad += [f"circle: {' -> '.join(c)}" for c in circles(found)]
        print("\n".join(bad) or "no arrow up, no circle")
        return 1 if bad else 0
    print(render(found, dot=args.dot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
