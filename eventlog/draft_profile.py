"""Per turn, how far drafts got: the mean accepted length of a speculative round and the
acceptance rate at each draft position, from the rounds the fold (eventlog/fold.py) reads
from any session's events (every backend records `verify` with the round's draft size and
`commit` with its accepted drafts).

The definitions are llama-server's (print_timing), so an imported llama.cpp session and
one of ours compare directly: mean length = 1 + accepted drafts / speculative rounds
(tokens a round commits at most), and the rate at position i = the share of speculative
rounds that accepted at least i drafts (over all of them, whatever their draft size).
Positions run 1..k, k the turn's longest draft; a turn with no speculative round has none.
"""

from dataclasses import dataclass, field
from typing import Any


@dataclass
class DraftProfile:
    """One turn's speculative rounds: (drafted, accepted) each."""

    rounds: list[tuple[int, int]] = field(default_factory=list)

    @property
    def mean_accept_len(self) -> float | None:
        """1 + accepted drafts per speculative round (None without one)."""
        if not self.rounds:
            return None
        return 1.0 + sum(a for _, a in self.rounds) / len(self.rounds)

    @property
    def acc_per_pos(self) -> list[float]:
        """The share of speculative rounds that accepted at least i drafts, i = 1..k."""
        if not self.rounds:
            return []
        k = max(d for d, _ in self.rounds)
        n = len(self.rounds)
        return [sum(a >= i for _, a in self.rounds) / n for i in range(1, k + 1)]

    def to_dict(self) -> dict[str, Any]:
        """The two figures as the JSON contract carries them."""
        return {"mean_accept_len": self.mean_accept_len, "acc_per_pos": self.acc_per_pos}
