"""One regular expression over a table of them: the reader tries every slot and speculative
line against tens of formats anchored at its start, and a Python loop over the table cost
most of its time. The table's patterns are joined into one alternation, each as a named
group, so the regex engine finds the first that matches in a single pass; that one is
matched again alone, so its builder reads its own groups by their own numbers."""

import re
from collections.abc import Sequence
from typing import Generic, TypeVar

V = TypeVar("V")


class Dispatch(Generic[V]):
    """A table of (pattern, value), each pattern anchored at the text's start; `first`
    finds the first pattern that matches."""

    def __init__(self, table: Sequence[tuple[re.Pattern[str], V]]) -> None:
        self.table = tuple(table)
        self._any = re.compile("|".join(f"(?P<_{i}>{p.pattern})"
                                        for i, (p, _) in enumerate(self.table)))

    def first(self, text: str) -> tuple[re.Match[str], V] | None:
        """The match of the first pattern (in table order) that matches at the start of
        `text`, and its value; None when none does."""
        m = self._any.match(text)
        if m is None or m.lastgroup is None:
            return None
        pattern, value = self.table[int(m.lastgroup[1:])]
        own = pattern.match(text)
        return None if own is None else (own, value)
