"""Flight-recorder mode: the last requests of each slot, up to `rounds` rounds per slot,
held in memory (each with its findings) instead of the ledger; a finding writes them all
out. A server that runs for weeks costs this much memory and, between incidents, no
disk."""

from collections import deque

from eventlog.postmortem.finding import Finding
from specledger.watch.requests import Request

Held = tuple[Request, list[Finding]]


def _rounds(held: Held) -> int:
    return max(1, len(held[0].task.rounds))


class Ring:
    """Per slot, the newest requests whose rounds add up to at most `rounds` (always the
    newest one, however long)."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self._slots: dict[int, deque[Held]] = {}
        self._held: dict[int, int] = {}

    def add(self, req: Request, findings: list[Finding]) -> None:
        """Hold `req` with its findings, dropping its slot's oldest requests beyond the
        bound."""
        slot = req.task.slot
        q = self._slots.setdefault(slot, deque())
        q.append((req, findings))
        self._held[slot] = self._held.get(slot, 0) + _rounds(q[-1])
        while len(q) > 1 and self._held[slot] > self.rounds:
            self._held[slot] -= _rounds(q.popleft())

    def drain(self) -> list[Held]:
        """Every held request with its findings, in log order (a later server run's
        after an earlier one's, though its line numbers start again); the ring is empty
        after."""
        out = sorted((h for q in self._slots.values() for h in q),
                     key=lambda h: (h[0].run, h[0].last_line))
        self._slots.clear()
        self._held.clear()
        return out

    @property
    def held_rounds(self) -> int:
        """Rounds held now."""
        return sum(self._held.values())

    def __len__(self) -> int:
        return sum(len(q) for q in self._slots.values())
