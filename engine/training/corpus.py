"""The training corpus every machine has: functions of the running Python's standard
library, found with `ast`, each split into the part a user shows (signature, docstring,
the code before it) and the part the model writes (the body). Files are split into train
and held-out by a hash of their path, so the split never depends on file order."""

import ast
import hashlib
import sysconfig
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

# Sizes in UTF-8 bytes (= tokens of the byte-level tokenizer). Short bodies keep whole
# conversations inside the training window and teach the model that answers end.
MIN_BODY = 8
MAX_BODY = 384
MAX_HEADER = 384
MAX_CONTEXT = 256
HELD_OUT_PER_256 = 26  # ~10% of files
_SKIPPED_DIRS = frozenset({"site-packages", "test", "tests", "idle_test", "__pycache__"})


class Split(StrEnum):
    """Which side of the fixed file split."""

    TRAIN = "train"
    HELD_OUT = "held_out"


@dataclass(frozen=True)
class Function:
    """One function of one file, in pieces; every piece is dedented to the `def` line."""

    path: str       # relative to the stdlib root, '/'-separated
    context: str    # whole source lines just before the function (at most MAX_CONTEXT bytes)
    signature: str  # decorators and the `def ...:` line(s)
    header: str     # signature plus docstring, if any
    body: str       # the rest of the function, trailing whitespace stripped


def stdlib_root() -> Path:
    """The running interpreter's standard library directory."""
    return Path(sysconfig.get_paths()["stdlib"])


def split_of(path: str) -> Split:
    """The split a file belongs to, from a hash of its relative path."""
    digest = hashlib.sha256(path.encode()).digest()
    return Split.HELD_OUT if digest[0] < HELD_OUT_PER_256 else Split.TRAIN


def source_files(split: Split, root: Path | None = None) -> list[tuple[str, Path]]:
    """(relative path, file) of every .py file of `split` under `root`, sorted by path;
    tests, third-party packages and caches are left out."""
    root = stdlib_root() if root is None else root
    files = ((file.relative_to(root), file) for file in root.rglob("*.py"))
    return sorted((rel.as_posix(), file) for rel, file in files
                  if _SKIPPED_DIRS.isdisjoint(rel.parts) and split_of(rel.as_posix()) is split)


def functions(path: str, source: str) -> list[Function]:
    """The usable functions of one file in source order (module level and in classes,
    not nested in functions); [] when the file does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines = source.splitlines()
    found = (_cut(path, lines, node) for node in _defs(tree.body))
    return [f for f in found if f is not None]


def iter_functions(split: Split, root: Path | None = None,
                   max_files: int | None = None) -> Iterator[Function]:
    """Every usable function of the files of `split`, file by file in path order."""
    for path, file in source_files(split, root)[:max_files]:
        try:
            source = file.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        yield from functions(path, source)


def _defs(body: list[ast.stmt]) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from _defs(node.body)


def _cut(path: str, lines: list[str],
         node: ast.FunctionDef | ast.AsyncFunctionDef) -> Function | None:
    first = _statement_start(node) - 1
    docstring = ast.get_docstring(node, clean=False) is not None
    code = node.body[1:] if docstring else node.body
    if not code or node.end_lineno is None:
        return None
    doc_end = node.body[0].end_lineno if docstring else None
    sig_end = _statement_start(node.body[0]) - 1  # 0-based index of the first body line
    body_start = doc_end if doc_end is not None else sig_end
    if sig_end <= first or body_start >= _statement_start(code[0]):
        return None  # a one-line def, or code on the docstring's line
    indent = lines[node.lineno - 1][:node.col_offset]
    piece = lines[first:node.end_lineno]
    # A body line outside the def's indentation (a multi-line string) cannot be dedented.
    if any(line.strip() and not line.startswith(indent) for line in piece):
        return None
    piece = [line[len(indent):] for line in piece]
    signature = "\n".join(piece[:sig_end - first])
    header = "\n".join(piece[:body_start - first])
    body = "\n".join(piece[body_start - first:]).rstrip()
    if not MIN_BODY <= len(body.encode()) <= MAX_BODY or len(header.encode()) > MAX_HEADER:
        return None
    return Function(path=path, context=_context(lines, first), signature=signature,
                    header=header, body=body)


def _statement_start(node: ast.stmt) -> int:
    """1-based first line of a statement, decorators included."""
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def _context(lines: list[str], first: int) -> str:
    taken: list[str] = []
    size = 0
    for line in reversed(lines[:first]):
        size += len(line.encode()) + 1
        if size > MAX_CONTEXT:
            break
        taken.append(line)
    return textwrap.dedent("\n".join(reversed(taken))).strip("\n")
