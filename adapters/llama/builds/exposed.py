"""Which known incidents a llama.cpp session's build is exposed to, for any banner its
log prints (`build 1 (0c1e570) with GNU ...`, `build_info: b484-2c4055912`, ...): a build
of the matrix by what its own source carries (builds.json); any other upstream build by
its number against each incident's first bug build and first fixed build
(adapters/llama/builds/history.py); a fork, a pull request's branch, ik_llama.cpp or a log
without a banner: unknown, with the reason (adapters/llama/builds/placement.py).

A user who does not know their build learns it from the log: `show` prints this."""

from dataclasses import dataclass
from typing import Any

from adapters.llama.builds.history import Span, Verdict, upstream
from adapters.llama.builds.incidents import INCIDENTS, Incident
from adapters.llama.builds.matrix import Exposure
from adapters.llama.builds.placement import Placement, place

_SOURCE = {Exposure.BUG: Verdict.EXPOSED, Exposure.FIXED: Verdict.FIXED,
           Exposure.ABSENT: Verdict.ABSENT}
"""A matrix build's source reading as a verdict."""


@dataclass(frozen=True)
class Judged:
    """One incident's verdict for the session's build, with its upstream span."""

    incident: Incident
    verdict: Verdict
    span: Span

    def line(self) -> str:
        """`  #28049 accepted tokens ...: exposed (upstream: bug from b8842, no fix merged
        through b11312; finding ...); fix: ...`."""
        i = self.incident
        head = f"  {i.key} {i.title}: {self.verdict.value} (upstream: {self.span.summary()}"
        if self.verdict is not Verdict.EXPOSED:
            return head + ")"
        return (head + f"; finding {i.finding}); fix: {i.fix}"
                + (f"; not on a CPU: {i.cpu}" if i.cpu else ""))

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        s = self.span
        return {"key": self.incident.key, "verdict": self.verdict.value,
                "bug_build": s.bug.build, "bug_commit": s.bug.commit,
                "fix_build": s.fix.build if s.fix else None,
                "fix_commit": s.fix.commit if s.fix else None,
                "open_through": s.open_through.build if s.open_through else None}


@dataclass(frozen=True)
class BuildExposure:
    """A session's build as its banner names it: where it was placed (the matrix build,
    upstream's build number, or why neither) and every known incident's verdict."""

    banner: str | None
    placement: Placement
    judged: tuple[Judged, ...]

    @property
    def incidents(self) -> tuple[Incident, ...]:
        """The incidents the build is exposed to."""
        return tuple(j.incident for j in self.judged if j.verdict is Verdict.EXPOSED)

    def head(self) -> str:
        """The build line: what the build is, on what ground, and the count of incidents
        it is exposed to (or why none can be told)."""
        p = self.placement
        if p.matrix is not None:
            number = f", upstream b{p.build}" if p.build is not None else ""
            head = (f"llama.cpp build: {p.matrix.label()}, llama-cpp-python "
                    f"{p.matrix.version}{number} (its source)")
        elif p.build is not None:
            head = f"llama.cpp build: '{self.banner}': upstream b{p.build}, {p.why}"
        else:
            said = f"'{self.banner}': " if self.banner else ""
            return (f"llama.cpp build: {said}{p.why}; its known incidents are unknown "
                    "(`specledger llama builds` lists the build matrix)")
        unknown = sum(j.verdict is Verdict.UNKNOWN for j in self.judged)
        return (f"{head}: exposed to {len(self.incidents)} known incident(s)"
                + (f", {unknown} unknown" if unknown else ""))

    def lines(self) -> list[str]:
        """The text `show` prints: the build line, then every incident with its verdict
        and its first bug and fixed builds upstream."""
        return [self.head(), *(j.line() for j in self.judged)]

    def to_dict(self) -> dict[str, Any]:
        """JSON form (`show --json`'s `llama_build`): `incidents` lists those exposed."""
        p = self.placement
        return {"banner": self.banner,
                "version": p.matrix.version if p.matrix is not None else None,
                "commit": p.matrix.commit if p.matrix is not None else None,
                "in_matrix": p.matrix is not None,
                "upstream_build": p.build, "judged_by": p.basis.value, "why": p.why,
                "incidents": [{"key": i.key, "title": i.title, "finding": i.finding,
                               "fix": i.fix, "cpu": i.cpu} for i in self.incidents],
                "verdicts": [j.to_dict() for j in self.judged]}


def verdict(placement: Placement, incident: Incident, span: Span) -> Verdict:
    """One incident's verdict: the matrix build's source, else the span at the placed
    build number, else unknown."""
    if placement.matrix is not None:
        return _SOURCE[placement.matrix.exposures[incident.key]]
    if placement.build is None:
        return Verdict.UNKNOWN
    return span.at(placement.build)


def build_exposure(config: dict[str, Any]) -> BuildExposure | None:
    """The exposure of a stored session's build, or None for a session no llama.cpp
    server ran (our own engines)."""
    if config.get("engine") != "llama.cpp":
        return None
    banner = config.get("build")
    placement = place(banner, bool(config.get("structured_log")))
    spans = upstream().spans
    return BuildExposure(banner, placement, tuple(
        Judged(i, verdict(placement, i, spans[i.key]), spans[i.key]) for i in INCIDENTS))
