"""How much code a range of commits added to the library, commit by commit: code lines
are the lines of a Python file that are not blank, not a comment and not part of a
docstring (a module's, class's or function's, or a bare string under a field), so that
documentation neither hides nor pads a change's size. Commits whose subject matches
`--other` are counted apart (the features of other issues).

    python tools/code_lines.py BASE [--other REGEX] [--list]
"""

import argparse
import ast
import re
import subprocess
import sys

# kernels/ is speckernels/ before its rename: a range from before it counts both sides.
LIBRARY = ("adapters/", "engine/", "eventlog/", "fsm/", "kernels/", "speckernels/",
           "specledger/", "viz/", "specbench/")


def code_lines(source: str) -> int:
    """Lines of `source` that are code: not blank, not comment-only, not a docstring
    (an unparsable file counts 0)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return 0
    docs: set[int] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            docs.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return sum(1 for i, line in enumerate(source.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in docs)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout


def _at(rev: str, path: str) -> str:
    done = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else ""


def commit_delta(rev: str) -> int:
    """Code lines a commit added to the library's Python files (renames as a deletion
    and an addition)."""
    paths = _git("diff", "--no-renames", "--name-only", f"{rev}^", rev).split()
    return sum(code_lines(_at(rev, p)) - code_lines(_at(f"{rev}^", p)) for p in paths
               if p.endswith(".py") and p.startswith(LIBRARY))


def main(argv: list[str]) -> int:
    """Print each commit's delta (with --list) and the totals, the `--other` ones apart."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base", help="the commit before the range")
    p.add_argument("--other", default=None, help="subjects of other issues' commits (regex)")
    p.add_argument("--list", action="store_true", help="print every commit's delta")
    args = p.parse_args(argv)
    other = re.compile(args.other) if args.other else None
    totals = {"this": 0, "other": 0}
    for rev in _git("rev-list", "--reverse", "--no-merges", f"{args.base}..HEAD").split():
        subject = _git("log", "-1", "--format=%s", rev).strip()
        delta = commit_delta(rev)
        kind = "other" if other is not None and other.search(subject) else "this"
        totals[kind] += delta
        if args.list and delta:
            print(f"{delta:+6d} {kind:5} {rev[:7]} {subject[:90]}")
    print(f"code lines since {args.base}: {totals['this'] + totals['other']:+d} "
          f"({totals['other']:+d} in commits matching --other, {totals['this']:+d} in the rest)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
