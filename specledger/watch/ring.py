"""Flight-recorder mode: the last requests of each slot, up to `rounds` rounds per slot,
held in memory instead of the ledger; a finding writes them all out. A server that runs
for weeks costs this much memory and, between incidents, no disk."""

from collections import deque

from specledger.watch.requests import Request


def _rounds(req: Request) -> int:
    return max(1, len(req.task.rounds))


class Ring:
    """Per slot, the newest requests whose rounds add up to at most `rounds` (always the
    newest one, however long)."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self._slots: dict[int, deque[Request]] = {}
        self._held: dict[int, int] = {}

    def add(self, req: Request) -> None:
        """Hold `req`, dropping its slot's oldest requests beyond the bound."""
        slot = req.task.slot
        q = self._slots.setdefault(slot, deque())
        q.append(req)
        self._held[slot] = self._held.get(slot, 0) + _rounds(req)
        while len(q) > 1 and self._held[slot] > self.rounds:
            self._held[slot] -= _rounds(q.popleft())

    def drain(self) -> list[Request]:
        """Every held request, in log order; the ring is empty after."""
        out = sorted((r for q in self._slots.values() for r in q), key=lambda r: r.last_line)
        self._slots.clear()
        self._held.clear()
        return out

    @property
    def held_rounds(self) -> int:
        """Rounds held now."""
        return sum(self._held.values())

    def __len__(self) -> int:
        return sum(len(q) for q in self._slots.values())
