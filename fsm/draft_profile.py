"""Per turn, how far drafts got: the mean accepted length of a speculative round and the
acceptance rate at each draft position, from a turn's speculative rounds. One definition
for both readers: the log's fold (eventlog/fold.py) profiles any session's turns from its
events (every backend records `verify` with the round's draft size and `commit` with its
accepted drafts), and the llama.cpp import (adapters/llama/ledger/crosscheck.py) checks
llama-server's own figures against the rounds it imported.

The definitions are llama-server's (print_timing), so an imported llama.cpp session and
one of ours compare directly: mean length = 1 + accepted drafts / speculative rounds
(tokens a round commits at most), and the rate at position i = the share of speculative
rounds that accepted at least i drafts (over all of them, whatever their draft size).
Positions run 1..k, k the turn's longest draft; a turn with no speculative round has none.
A turn whose rounds its log does not show (llama-server without -v) carries the engine's
own figures instead, where the log prints them (`reported`); a figure it does not print is
None (unknown), not a turn without speculation.
"""

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reported:
    """An engine's own figures for a turn whose rounds are not known (None: not printed)."""

    mean_accept_len: float | None
    acc_per_pos: list[float] | None


@dataclass
class DraftProfile:
    """One turn's speculative rounds: (drafted, accepted) each, the draft size of the
    round's first verification and the drafts it accepted."""

    rounds: list[tuple[int, int]] = field(default_factory=list)
    reported: Reported | None = None

    @property
    def drafted(self) -> int:
        """Draft tokens verified (first verifications only)."""
        return sum(k for k, _ in self.rounds)

    @property
    def accepted(self) -> int:
        """Draft tokens accepted."""
        return sum(a for _, a in self.rounds)

    @property
    def mean_accept_len(self) -> float | None:
        """1 + accepted drafts per speculative round (None without one), or the engine's
        own where the rounds are not known."""
        if not self.rounds:
            return self.reported.mean_accept_len if self.reported is not None else None
        return 1.0 + self.accepted / len(self.rounds)

    def rate_at(self, position: int) -> float:
        """The share of speculative rounds that accepted at least `position` drafts (0
        without one)."""
        if not self.rounds:
            return 0.0
        return sum(a >= position for _, a in self.rounds) / len(self.rounds)

    @property
    def acc_per_pos(self) -> list[float] | None:
        """`rate_at` each draft position i = 1..k, or the engine's own where the rounds
        are not known (None where it did not print them)."""
        if not self.rounds and self.reported is not None:
            return self.reported.acc_per_pos
        k = max((d for d, _ in self.rounds), default=0)
        # `rate_at` for every position in one pass: the rounds that accepted exactly a
        # drafts, then at least i, from the longest down.
        exactly = [0] * (k + 1)
        for _, a in self.rounds:
            if a > 0:
                exactly[min(a, k)] += 1
        at_least, rates = 0, []
        for i in range(k, 0, -1):
            at_least += exactly[i]
            rates.append(at_least / len(self.rounds))
        return rates[::-1]

    def to_dict(self) -> dict[str, Any]:
        """The two figures as the JSON contract carries them."""
        return {"mean_accept_len": self.mean_accept_len, "acc_per_pos": self.acc_per_pos}
