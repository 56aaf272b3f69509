"""tools/code_lines.py counts code, not documentation: blank lines, comments and every
docstring (module, class, function, a field's) are left out; an unparsable file is 0."""

import importlib.util
from pathlib import Path

SPEC = importlib.util.spec_from_file_location(
    "code_lines", Path(__file__).parents[2] / "tools" / "code_lines.py")
assert SPEC is not None and SPEC.loader is not None
TOOL = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(TOOL)

SOURCE = '''"""A module docstring
over two lines."""

import os  # a trailing comment keeps its line


class A:
    """A class docstring."""

    field: int = 0
    """A field's docstring."""

    def f(self) -> str:
        # a comment line
        text = """not a docstring:
an assigned string"""
        return text + os.sep
'''


def test_only_code_lines_count() -> None:
    # import, class, field, def, the assignment's two lines, return
    assert TOOL.code_lines(SOURCE) == 7
    assert TOOL.code_lines("def broken(:\n") == 0
    assert TOOL.code_lines("") == 0
