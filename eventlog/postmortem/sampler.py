"""The sampler a session says it sampled with against the one its engine's log shows: a
recorded `temperature 0, top_k 0, top_p 1` claims the full distribution, and a server that
kept its own top_k 40, top_p 0.95 and min_p 0.05 did not sample it.

The claim is the session's `sampler` (a run of ours on another engine stores it); what was
used is each START_TURN's `sampler` (an imported log with -v gives it; without, there is
nothing to compare, and the check is said to be skipped). Both are in one set of terms
(adapters/llama/ledger/sampler.py): each parameter, the acting samplers we have no parameter for
(`others`), and the order of those that act. At temperature 0 the sampler draws the
argmax whatever top-k, top-p or min-p keep, so there a difference in those is a warning (the
session's record is wrong, its tokens are not); elsewhere, or with another sampler acting,
an error.
"""

from typing import Any

from eventlog.postmortem.advice import ADVICE
from eventlog.postmortem.detector import Handler, Row, examples
from eventlog.postmortem.finding import Finding, Kind, Noted, Severity
from fsm.payloads import StartTurn
from fsm.states import Trigger

TOLERANCE = 0.0005  # the log prints the parameters with 3 decimals
_PARAMS = ("temperature", "top_k", "top_p", "min_p")
# Filters that always keep the likeliest token: they cannot change a greedy draw.
_KEEP_ARGMAX = {"top_k", "top_p", "min_p"}


def differences(claim: dict[str, Any], used: dict[str, Any]) -> list[dict[str, Any]]:
    """Where `used` is not `claim` (pure): one row per parameter, acting sampler or order."""
    out = []
    for name in _PARAMS:
        a, b = claim.get(name), used.get(name)
        if a is not None and b is not None and abs(float(a) - float(b)) > TOLERANCE + 1e-9:
            out.append({"what": name, "claimed": a, "used": b})
    if used.get("others"):
        out.append({"what": "others", "claimed": [], "used": list(used["others"])})
    # The order matters between samplers both sides apply, and only where the
    # temperature reshapes the distribution (0: the argmax; 1: no change).
    ours, theirs = claim.get("order", []), used.get("order", [])
    both = [n for n in theirs if n in ours]
    if claim.get("temperature") not in (0.0, 1.0) and both != [n for n in ours if n in both]:
        out.append({"what": "order", "claimed": ours, "used": theirs})
    return out


class SamplerCheck:
    """Folds each START_TURN's sampler against the session's claim."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.claim: dict[str, Any] | None = config.get("sampler")
        self.engine = config.get("engine", "the engine")
        self.turns = 0
        self.differing: list[Noted] = []

    def handlers(self) -> dict[Trigger, Handler]:
        """START_TURN, when the session claims a sampler."""
        return {} if self.claim is None else {Trigger.START_TURN: self._on_start}

    def _on_start(self, row: Row, p: StartTurn) -> None:
        used = p.get("sampler")
        if used is None or self.claim is None:
            return
        self.turns += 1
        found = differences(self.claim, used)
        if found:
            self.differing.append(Noted(*row[:4], found))

    def finish(self) -> list[Finding]:
        """One finding for every turn sampled otherwise than claimed."""
        if not self.differing or self.claim is None:
            return []
        first = self.differing[0]
        rows: list[dict[str, Any]] = first.detail
        greedy = self.claim.get("temperature") == 0.0
        harmless = greedy and all(r["what"] in _KEEP_ARGMAX for d in self.differing
                                  for r in d.detail)
        said = "; ".join(f"{r['what']} {r['used']} (the session says {r['claimed']})"
                         for r in rows)
        text = (f"{len(self.differing)} of {self.turns} turn(s) were sampled otherwise than "
                f"the session records: {self.engine}'s log shows {said}.")
        text += (" At temperature 0 the draw is the argmax, which these filters keep: the "
                 "tokens are right, the recorded sampler is not." if harmless else
                 " The answers were drawn from another distribution than the one recorded.")
        return [Finding(
            Kind.SAMPLER_MISMATCH, Severity.WARNING if harmless else Severity.ERROR,
            first.seq, self.differing[-1].seq, text, ADVICE[Kind.SAMPLER_MISMATCH],
            {"turns": len(self.differing), "turns_checked": self.turns, "first": rows,
             "claimed": self.claim,
             "per_turn": examples([{"slot": d.slot, "turn": d.turn, "differences": d.detail}
                                   for d in self.differing])},
            first.slot, first.turn, first.round)]
