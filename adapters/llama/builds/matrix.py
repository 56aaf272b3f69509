"""The llama.cpp build matrix: the llama-cpp-python versions specledger builds side by side
(adapters/llama/server/paths.py), each vendoring one llama.cpp, and what is known of each.

The facts of each build (its llama.cpp commit and date, which speculative types and flags
its server has, which known incidents its source carries) are not typed here: the script
`tools/llama_matrix.py` reads them from each version's source distribution and writes
`builds.json` beside this module and the table in docs/llama-builds.md.
"""

import json
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from adapters.llama.builds.banner import parse_banner

MATRIX = ("0.3.20", "0.3.21", "0.3.24", "0.3.30", "0.3.36")
"""The pinned builds, oldest first: 0.3.20 refuses speculation on a hybrid model; 0.3.21
is the first with speculative checkpoints; 0.3.24 the first with draft-mtp and chains."""

FACTS_FILE = Path(__file__).with_name("builds.json")


class Dialect(StrEnum):
    """How a build's llama-server spells its speculative flags (common/arg.cpp)."""

    LEGACY = "legacy"          # --draft-max/--draft-min, --spec-ngram-size-n/m, one type
    SPEC_DRAFT = "spec-draft"  # --spec-draft-n-max, --spec-ngram-<type>-*, chains


class Exposure(StrEnum):
    """What a build's source says of one known incident."""

    BUG = "bug"            # the code the incident is about is there, unfixed
    FIXED = "fixed"        # the fix is in the source
    ABSENT = "absent"      # the build cannot run the scenario (no such drafter or path)


@dataclass(frozen=True)
class Build:
    """One build of the matrix, as its source distribution shows it."""

    version: str
    commit: str
    date: str
    subject: str
    spec_types: tuple[str, ...]
    spec_checkpoints: bool
    chains: bool
    dialect: Dialect
    exposures: dict[str, Exposure]

    @property
    def short(self) -> str:
        """The commit as llama.cpp's banner prints it (7 hex digits)."""
        return self.commit[:7]

    def label(self) -> str:
        """`0.3.30 (llama.cpp e3a74b2, 2026-06-16)`."""
        return f"{self.version} (llama.cpp {self.short}, {self.date[:10]})"

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> "Build":
        """The build from its builds.json entry."""
        return cls(version=doc["version"], commit=doc["commit"], date=doc["date"],
                   subject=doc["subject"], spec_types=tuple(doc["spec_types"]),
                   spec_checkpoints=bool(doc["spec_checkpoints"]), chains=bool(doc["chains"]),
                   dialect=Dialect(doc["dialect"]),
                   exposures={k: Exposure(v) for k, v in doc["exposures"].items()})


@cache
def matrix() -> tuple[Build, ...]:
    """Every build of the matrix with its facts, oldest first (those builds.json has)."""
    if not FACTS_FILE.is_file():
        return ()
    doc = json.loads(FACTS_FILE.read_text())
    return tuple(Build.from_dict(b) for b in doc["builds"])


def facts(version: str) -> Build | None:
    """The facts of build `version`, or None for a version outside the matrix."""
    return next((b for b in matrix() if b.version == version), None)


def match_banner(banner: str | None) -> Build | None:
    """The matrix build a server's banner (`build 1 (0c1e570) with GNU ...`, as the log
    prints it, or `build_info: b1-0c1e570`) names by its commit, or None (no banner, or
    a commit outside the matrix)."""
    parsed = parse_banner(banner)
    if parsed is None:
        return None
    return next((b for b in matrix() if b.commit.startswith(parsed.commit)), None)
