"""Which upstream llama.cpp build a log's banner is, and on what ground, or why that
cannot be told.

A banner names a build number and a commit. Upstream's number is the commit count of
master, so the two must agree: the commit decides where the history specledger holds
(adapters/llama/builds/history.py) or an anchor reaches it; a banner whose commit is no commit
of that history names a fork, a pull request's branch or a local build, whose number
counts other commits (havenoammo's b484, a PR branch's 9219) and says nothing of which
fixes it has. Past the history's tip only the number is left, and it is used as such.
ik_llama.cpp numbers its own builds.
"""

from dataclasses import dataclass
from enum import StrEnum

from adapters.llama.builds.banner import Wording, parse_banner
from adapters.llama.builds.history import Upstream, upstream
from adapters.llama.builds.matrix import Build, match_banner


class Basis(StrEnum):
    """What places a banner's build."""

    MATRIX = "matrix"    # a build of the matrix, by commit: its own source decides
    COMMIT = "commit"    # its commit is upstream's build of that number
    NUMBER = "number"    # past the history held: its number alone, the commit unchecked
    NONE = "none"        # not placed: `why` says why


@dataclass(frozen=True)
class Placement:
    """A banner's upstream build number (None: not placed), the ground for it, the matrix
    build it is (if so) and one sentence saying how it was decided."""

    build: int | None
    basis: Basis
    matrix: Build | None
    why: str


def place(banner: str | None, structured_log: bool = False) -> Placement:
    """The upstream build `banner` names (as the session's config stores it); a server
    that logs in ik_llama.cpp's structured format (`structured_log`) is ik_llama.cpp's."""
    history = upstream()
    parsed = parse_banner(banner)
    if banner is None:
        return Placement(None, Basis.NONE, None, "no banner in the log")
    if parsed is None:
        return Placement(None, Basis.NONE, None, "the banner names no build and commit")
    if parsed.wording is Wording.IK or structured_log:
        return Placement(None, Basis.NONE, None,
                         "ik_llama.cpp's build: it numbers its builds its own way, and its "
                         "fixes are not upstream's")
    matrix = match_banner(banner)
    held = history.build_of(parsed.commit)
    if matrix is not None:
        return Placement(held, Basis.MATRIX, matrix, "a build of the matrix: its source")
    if held is not None:
        said = "" if held == parsed.number else f" (the banner says {parsed.number})"
        return Placement(held, Basis.COMMIT, None, f"by its commit{said}")
    return _not_held(parsed.number, parsed.commit, history)


def _not_held(number: int, commit: str, history: Upstream) -> Placement:
    """A banner whose commit the history does not hold: within it, not upstream's; past
    its tip, upstream's by number if anything."""
    if number <= history.tip.build:
        theirs = history.commit_at(number)
        return Placement(None, Basis.NONE, None,
                         f"not upstream llama.cpp's b{number} ({theirs or 'no such build'}), "
                         f"and {commit} is no commit of upstream's master up to "
                         f"b{history.tip.build}: a fork, a pull request's branch or a local "
                         "build, whose number counts other commits")
    return Placement(number, Basis.NUMBER, None,
                     f"by its number alone: past b{history.tip.build}, the newest build "
                     f"whose commit specledger holds, its commit {commit} is not checked")
