"""Prefixes that something other than the engine wrote before its lines, learned per file
from the lines themselves: a log shipper's timestamp (`docker logs --timestamps`, `kubectl
logs --timestamps`, a `docker logs` dump's `2026-05-14 22:13:25.196 | `), docker compose's
service column (`llama-cpp-server  | `), journald's `May 17 10:02:11 host unit[pid]: `, a
router's `[pid] ` before a child server's lines, or any mix of them in one file.

One mechanism takes them all, for every engine. An engine's line body begins with a tag its
logger always writes (llama-server's own `M.ss.mmm.uuu L` time or `slot`/`srv` tag, vLLM's
`INFO 05-14 22:13:25 [file.py:12]`, ...): the engine's reader gives that tag as a pattern,
and what stands before the first such tag on a line is that line's prefix. A prefix's
shape keeps its punctuation and turns each run of digits, letters or spaces into a class;
the shapes the file's tagged lines show become one regular expression that strips a
prefix of any of them from every line, the untagged continuation lines (a multi-line
timing block, a chat template) included. A shape is learned only when it holds a digit or
a `|` (a time, a process id, a column), so a line of plain text never teaches the reader
to eat the start of other lines.
"""

import calendar
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

_DELIMITERS = frozenset(" \t|]>")  # what stands between a prefix and a tag
_SHAPE_TOKEN = re.compile(r"\d+|[^\W\d_]+| +|\t+|.", re.S)
LEARN_LINES = 5000  # a prefix shows on the first lines; later ones are learned as met
_PID = re.compile(r"\[(\d+)\]")
# Wall-clock times a prefix may hold: ISO 8601 (docker, kubectl, most shippers) and syslog.
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")
_SYSLOG = re.compile(r"\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d{1,2}) "
                     r"(\d\d):(\d\d):(\d\d)(?:\.(\d+))?")
_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul",
                                        "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def clean(raw: str) -> str:
    """A physical line without its ANSI colours and carriage return."""
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    return raw[:-1] if raw.endswith("\r") else raw


def shape(prefix: str) -> str:
    """A prefix's shape as a regular expression: digit runs `\\d+`, letter runs
    `[^\\W\\d_]+`, space runs ` +`, anything else (a tab too) itself."""
    out = []
    for tok in _SHAPE_TOKEN.findall(prefix):
        if tok[0].isdigit():
            out.append(r"\d+")
        elif tok[0].isalpha():
            out.append(r"[^\W\d_]+")
        elif tok[0] == " ":
            out.append(" +")  # a tab after a prefix is the line's own (sampler params)
        else:
            out.append(re.escape(tok))
    return "".join(out)


def _plausible(prefix: str) -> bool:
    """Whether a text before a tag can be a prefix: it ends at a delimiter and holds a
    number (a time, a process id) or a column bar."""
    return prefix[-1] in " |]:>" and (any(c.isdigit() for c in prefix) or "|" in prefix)


def tag_at(tag: re.Pattern[str], line: str) -> int | None:
    """Where the first of the engine's tags (`tag`, a pattern of what its bodies start
    with) begins in `line`, at its start or after a delimiter; None: nowhere."""
    for m in tag.finditer(line):
        at = m.start()
        if at == 0 or line[at - 1] in _DELIMITERS:
            return at
    return None


@dataclass
class Prefixes:
    """The prefix shapes of one file, as learned so far (before lines with the engine's
    `tag`), and how many lines showed each."""

    tag: re.Pattern[str]
    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    _pattern: re.Pattern[str] | None = None

    def learn(self, lines: Iterable[str]) -> None:
        """Learn the shapes the tagged ones among `lines` show."""
        for line in lines:
            self.learn_line(line)

    def learn_line(self, line: str) -> bool:
        """Learn the prefix of one line, if it has a tag after a plausible prefix; whether
        its shape was new."""
        at = tag_at(self.tag, line)
        if not at or not _plausible(line[:at]):
            return False
        s = shape(line[:at])
        new = s not in self.counts
        self.counts[s] += 1
        if new:
            self.examples[s] = line[:at]
            self._pattern = None
        return new

    @property
    def pattern(self) -> re.Pattern[str] | None:
        """One expression matching any learned prefix at a line's start (longest shapes
        first, so a shape that extends another wins); None when the file has none."""
        if self._pattern is None and self.counts:
            alts = sorted(self.counts, key=len, reverse=True)
            self._pattern = re.compile("(?:" + "|".join(alts) + ")")
        return self._pattern

    def split(self, line: str) -> tuple[str, str]:
        """(prefix, body) of one line; a line no learned shape starts is all body."""
        pattern = self.pattern
        if pattern is None:
            return "", line
        m = pattern.match(line)
        if m is None:
            return "", line
        return line[:m.end()], line[m.end():]

    def shown(self) -> list[str]:
        """An example of each learned prefix, the most frequent shape first (what the
        import reports)."""
        return [self.examples[s] for s, _ in self.counts.most_common()]


def learn_prefixes(tag: re.Pattern[str], lines: list[str]) -> Prefixes:
    """The prefixes of a file, from its first lines, before the engine's `tag`."""
    p = Prefixes(tag)
    p.learn(lines[:LEARN_LINES])
    return p


def prefix_pid(prefix: str) -> int | None:
    """The process id a prefix names in brackets (the router's `[pid]`, journald's
    `unit[pid]:`), else None."""
    m = _PID.search(prefix)
    return int(m.group(1)) if m is not None else None


def prefix_time(prefix: str) -> float | None:
    """The wall-clock time a prefix holds, in seconds since the epoch taken as UTC (a
    syslog time, which has no year, counts from the start of 1970); None: it holds none."""
    m = _ISO.search(prefix)
    if m is not None:
        y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
        frac = float("0." + m.group(7)) if m.group(7) else 0.0
        return calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + frac
    m = _SYSLOG.search(prefix)
    if m is not None:
        mo, d, h, mi, s = _MONTHS[m.group(1)], *(int(m.group(i)) for i in range(2, 6))
        frac = float("0." + m.group(6)) if m.group(6) else 0.0
        return calendar.timegm((1970, mo, d, h, mi, s, 0, 0, 0)) + frac
    return None
