"""Which known incidents a llama.cpp session's build is exposed to: the build its log's
banner names (`build 1 (0c1e570) with GNU ...`), matched to the matrix by commit, and the
incidents of adapters/llama/incidents.py whose bug that build's source carries unfixed.

A user who does not know their build learns it from the log: `show` prints this."""

from dataclasses import dataclass
from typing import Any

from adapters.llama.builds import Build, Exposure, match_banner
from adapters.llama.incidents import INCIDENTS, Incident


@dataclass(frozen=True)
class BuildExposure:
    """A session's build as its banner names it: the matrix build (None outside the
    matrix) and the known incidents it is exposed to."""

    banner: str | None
    build: Build | None
    incidents: tuple[Incident, ...]

    def lines(self) -> list[str]:
        """The text `show` prints: the build, then one line per incident with its fix."""
        if self.build is None:
            said = f"'{self.banner}'" if self.banner else "no banner in the log"
            return [f"llama.cpp build: {said}: not in the build matrix, its known incidents "
                    f"are unknown (`specledger llama builds` lists the matrix)"]
        head = f"llama.cpp build: {self.build.label()}, llama-cpp-python {self.build.version}"
        if not self.incidents:
            return [f"{head}: exposed to no known incident"]
        return [f"{head}: exposed to {len(self.incidents)} known incident(s)",
                *(f"  {i.key} {i.title} (finding {i.finding}); fix: {i.fix}"
                  + (f"; not on a CPU: {i.cpu}" if i.cpu else "") for i in self.incidents)]

    def to_dict(self) -> dict[str, Any]:
        """JSON form (`show --json`'s `llama_build`)."""
        return {"banner": self.banner,
                "version": self.build.version if self.build is not None else None,
                "commit": self.build.commit if self.build is not None else None,
                "in_matrix": self.build is not None,
                "incidents": [{"key": i.key, "title": i.title, "finding": i.finding,
                               "fix": i.fix, "cpu": i.cpu} for i in self.incidents]}


def build_exposure(config: dict[str, Any]) -> BuildExposure | None:
    """The exposure of a stored session's build, or None for a session no llama.cpp
    server ran (our own engines)."""
    if config.get("engine") != "llama.cpp":
        return None
    banner = config.get("build")
    build = match_banner(banner)
    exposed = () if build is None else tuple(
        i for i in INCIDENTS if build.exposures.get(i.key) is Exposure.BUG)
    return BuildExposure(banner, build, exposed)
