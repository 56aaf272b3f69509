"""One cell of the incidents table: what a scenario's recorded session, read by the
postmortem, says of one incident on one build (adapters/llama/builds/scenarios.py), and how
the cell prints.

A cell is `named` only when the postmortem has the incident's finding kind, at or after
the first turn the scenario can show it at, and quotes its numbers. An incident that
cannot happen on a CPU is judged on the evidence the run leaves: its restores, each
followed by one replay that verified as the first verification did (no position restored
twice: no storm, no livelock). Any other error finding of the session is kept in the cell:
a counter that disagrees, a crash, an answer that differs, is a finding in itself.
"""

from dataclasses import dataclass, field
from typing import Any

from adapters.llama.builds.incidents import Incident
from adapters.llama.builds.scenarios import Scenario, Verdict

_QUOTED = 8  # numbers a cell quotes of its finding


@dataclass(frozen=True)
class Cell:
    """One incident on one build: the verdict, why (the numbers or the evidence), the
    sessions it was judged on, the finding's numbers, what the build's source expects."""

    verdict: Verdict
    why: str
    expected: Verdict
    sessions: tuple[int, ...] = ()
    numbers: dict[str, Any] = field(default_factory=dict)
    others: tuple[str, ...] = ()  # the session's other error findings

    @property
    def as_expected(self) -> bool:
        """Whether the measurement agrees with what the build's source says."""
        return self.verdict is self.expected

    def short(self) -> str:
        """The table's cell: the verdict, its session(s), a flag where it surprises."""
        text = f"**{self.verdict.value}**" if self.verdict is Verdict.NAMED else (
            self.verdict.value)
        if self.sessions:
            text += " (s" + ", s".join(map(str, self.sessions)) + ")"
        if self.others:
            text += "; also " + ", ".join(self.others)
        if not self.as_expected and self.verdict not in (Verdict.NOT_BUILT, Verdict.NOT_RUN,
                                                         Verdict.FAILED):
            text += f"; source says {self.expected.value}"
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"verdict": self.verdict.value, "why": self.why,
                "expected": self.expected.value, "as_expected": self.as_expected,
                "sessions": list(self.sessions), "numbers": self.numbers,
                "others": list(self.others)}


def _scalars(numbers: dict[str, Any]) -> dict[str, Any]:
    """The finding's plain numbers (no lists, no nested examples), the first few."""
    flat = {k: v for k, v in numbers.items()
            if isinstance(v, (int, float, str)) and not isinstance(v, bool)
            and k not in ("cycle", "slot", "turn", "round")}
    return dict(list(flat.items())[:_QUOTED])


def judge(incident: Incident, scenario: Scenario, expected: Verdict, session: int,
          postmortem: dict[str, Any], turns: list[dict[str, Any]]) -> Cell:
    """The cell of `incident` from the postmortem (`Postmortem.to_dict()`) and the turn
    metrics of the scenario's session (END_TURN's, with the figures the log could not
    give named in `unknown`)."""
    findings = postmortem["findings"]
    others = tuple(sorted({f["kind"] for f in findings if f["severity"] == "error"
                           and f["kind"] != incident.finding}))
    hits = [f for f in findings if f["kind"] == incident.finding
            and (f["turn"] is None or f["turn"] >= scenario.from_turn)]
    empty = [f for f in hits if scenario.measure is not None
             and not f["numbers"].get(scenario.measure)]
    unmeasured = any(scenario.measure in (t.get("unknown") or ()) for t in turns)
    if hits and len(empty) == len(hits) and not unmeasured:
        return Cell(Verdict.CLEAN, f"{incident.finding} found with {scenario.measure} 0: "
                                   f"it measured nothing", expected, (session,),
                    hits[0]["numbers"], others)
    if hits:
        f = hits[0]
        quoted = _scalars(f["numbers"])
        where = f"turn {f['turn']} round {f['round']}" if f["turn"] is not None else "session"
        why = f"{incident.finding} at {where}: " + ", ".join(f"{k} {v}"
                                                            for k, v in quoted.items())
        if f in empty:  # the finding is there; the log does not give its size
            why += (f" ({scenario.measure} unknown: the log does not show what the count "
                    f"needs)")
        return Cell(Verdict.NAMED, why, expected, (session,), f["numbers"], others)
    restores = sum(t.get("restores") or 0 for t in turns)
    if incident.cpu:
        seen = (f"{restores} restore(s), each followed by one replay that verified as the "
                f"first verification did (no position restored twice)" if restores
                else "no speculative-checkpoint restore in this run")
        return Cell(Verdict.NOT_ON_CPU, f"{incident.cpu}. Evidence: {seen}", expected,
                    (session,), {"restores": restores}, others)
    return Cell(Verdict.CLEAN, f"no {incident.finding} finding ({restores} restore(s) in "
                               f"{len(turns)} turn(s))", expected, (session,),
                {"restores": restores}, others)
