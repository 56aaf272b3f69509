"""Upstream llama.cpp's history as specledger knows it: the commit of every build number
of master up to the newest commit held, a few build numbers past it that public files
state, and for each known incident (adapters/llama/builds/incidents.py) the first build whose
source carries its bug and the first whose source no longer does.

Nothing here is typed by hand: `tools/llama_history.py` reads a clone of master with the
same source signatures the build matrix is read with and writes `upstream_builds.txt`
and `incident_builds.json` beside this module; each number there carries its commit,
date and subject, or (an anchor) the public source that states it.
"""

import json
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

HISTORY_FILE = Path(__file__).with_name("incident_builds.json")
TABLE_FILE = Path(__file__).with_name("upstream_builds.txt")
TABLE_HASH = 9
"""Hex digits of each commit the table keeps: what a banner of today prints."""
SHORTEST = 7
"""The fewest hex digits a banner prints (llama.cpp's builds of 2023-2025)."""


class Verdict(StrEnum):
    """What is known of one incident in one build."""

    EXPOSED = "exposed"    # the build carries the incident's bug, unfixed
    FIXED = "fixed"        # the build has the fix (or no longer has the bug's code)
    ABSENT = "absent"      # the build cannot run into it (before the bug, or no such path)
    UNKNOWN = "unknown"    # nothing known decides it for this build


@dataclass(frozen=True)
class Mark:
    """One build of master: its number and commit, and what says so (the commit's date
    and subject, or a public source)."""

    build: int
    commit: str
    date: str | None = None
    subject: str | None = None
    how: str | None = None
    source: str | None = None

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> "Mark":
        """The mark from its json form."""
        return cls(build=int(doc["build"]), commit=doc["commit"], date=doc.get("date"),
                   subject=doc.get("subject"), how=doc.get("how"), source=doc.get("source"))


@dataclass(frozen=True)
class Span:
    """One incident in upstream's builds: its bug from `bug`, gone from `fix` on (None: no
    fix merged), and for an unfixed one the newest build known to still carry it."""

    key: str
    bug: Mark
    fix: Mark | None
    open_through: Mark | None

    def at(self, build: int) -> Verdict:
        """The incident in upstream's build number `build`: exposed from its bug's first
        build up to (not with) its fix's; past the newest build known to carry an
        unfixed bug, unknown (a fix may have come since)."""
        if build < self.bug.build:
            return Verdict.ABSENT
        if self.fix is not None:
            return Verdict.FIXED if build >= self.fix.build else Verdict.EXPOSED
        assert self.open_through is not None
        return Verdict.EXPOSED if build <= self.open_through.build else Verdict.UNKNOWN

    def summary(self) -> str:
        """`bug from b8842, fixed in b8983` / `bug from b8842, no fix merged through
        b11312`."""
        if self.fix is not None:
            return f"bug from b{self.bug.build}, fixed in b{self.fix.build}"
        assert self.open_through is not None
        return f"bug from b{self.bug.build}, no fix merged through b{self.open_through.build}"


@dataclass(frozen=True)
class Upstream:
    """Master's commits by build number (`commits[n - 1]` is bN's; None where no commit
    of master has that number) and by their first SHORTEST digits (`by_prefix`; a few
    collide), its newest held (`tip`), the anchors past it and the incidents' spans."""

    commits: tuple[str | None, ...]
    by_prefix: dict[str, tuple[int, ...]]
    tip: Mark
    anchors: tuple[Mark, ...]
    spans: dict[str, Span]

    def commit_at(self, build: int) -> str | None:
        """The commit of upstream's build `build` (None: past the tip, or no such build)."""
        held = self.commits[build - 1] if 0 < build <= len(self.commits) else None
        if held is not None:
            return held
        return next((a.commit for a in self.anchors if a.build == build), None)

    def build_of(self, commit: str) -> int | None:
        """The build number of upstream's commit `commit` (a banner's short hash, at least
        SHORTEST digits), or None where no commit held or anchored is it."""
        if len(commit) < SHORTEST:
            return None
        for build in self.by_prefix.get(commit[:SHORTEST], ()):
            if same(self.commits[build - 1], commit):
                return build
        return next((a.build for a in self.anchors if same(a.commit, commit)), None)


def same(a: str | None, b: str) -> bool:
    """Whether two hashes of one commit, of any lengths, agree on the digits both have."""
    n = min(len(a or ""), len(b))
    return a is not None and n >= SHORTEST and a[:n] == b[:n]


def _by_prefix(commits: tuple[str | None, ...]) -> dict[str, tuple[int, ...]]:
    """Build numbers by the first SHORTEST digits of their commit."""
    out: dict[str, list[int]] = {}
    for n, sha in enumerate(commits, start=1):
        if sha is not None:
            out.setdefault(sha[:SHORTEST], []).append(n)
    return {k: tuple(v) for k, v in out.items()}


@cache
def upstream() -> Upstream:
    """The history as the data files hold it."""
    doc = json.loads(HISTORY_FILE.read_text())
    commits = tuple(None if line == "-" else line
                    for line in TABLE_FILE.read_text().splitlines()
                    if line and not line.startswith("#"))
    tip = Mark.from_dict(doc["history"]["tip"])
    if len(commits) != tip.build or not same(commits[-1], tip.commit):
        raise ValueError(f"{TABLE_FILE.name} does not end at the tip b{tip.build}")
    spans = {key: Span(key, Mark.from_dict(s["bug"]),
                       Mark.from_dict(s["fix"]) if s["fix"] else None,
                       Mark.from_dict(s["open_through"]) if s["open_through"] else None)
             for key, s in doc["incidents"].items()}
    anchors = tuple(Mark.from_dict(a) for a in doc["anchors"] if not a["in_history"])
    return Upstream(commits, _by_prefix(commits), tip, anchors, spans)
