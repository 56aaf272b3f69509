"""Restore storms and replay livelocks (llama.cpp #28060).

A round that restores its checkpoint more than once at the same position has gone round a
cycle without progress. Under the `reverify` replay policy the replay verifies again, and
when numerics depend on the batch shape it disagrees with the verification every time:
5,362 restores for 322 tokens in the report. The forward-progress guard ends such a round
and logs a LIVELOCK; a round that never commits (a killed run) is one too.
"""

from dataclasses import dataclass, field
from typing import Any

from eventlog.postmortem.advice import ADVICE
from eventlog.postmortem.detector import (
    DURATION,
    ROUND,
    SEQ,
    SLOT,
    TIME,
    TURN,
    Handler,
    PathOf,
    Row,
    examples,
)
from eventlog.postmortem.finding import Finding, Kind, Severity
from fsm.payloads import Commit, Livelock, Restore
from fsm.states import Trigger


@dataclass(slots=True)
class _Round:
    slot: int
    turn: int
    round: int
    first_seq: int
    last_seq: int = 0  # its commit's; in a round the log ends inside, its last restore's
    restores: dict[int, int] = field(default_factory=dict)  # position -> restores
    repeats: int = 0  # most restores at one position
    redo_from: float = 0.0  # when the first repeated restore began, on the log's clock
    redo_s: float = 0.0  # from then to the round's end
    guard: Livelock | None = None
    unfinished: bool = False  # the log ends inside the round

    @property
    def locked(self) -> bool:
        """A livelock: the guard ended the round, or the log ends inside its storm."""
        return self.guard is not None or self.unfinished

    @property
    def worst(self) -> tuple[int, int]:
        """(position, restores) of the most restored position."""
        return max(self.restores.items(), key=lambda kv: kv[1], default=(-1, 0))


def name_cycle(path: list[str]) -> str:
    """The repeating part of a round's trigger path, as the states it walks: the shortest
    period of the path from the first verification to the guard or commit."""
    start = path.index("verify") if "verify" in path else 0
    tail = [p for p in path[start:] if p not in ("livelock", "commit")]
    unit = _period(tail)
    if unit is None:
        # A head before the repeats (an imported log's first verdict: verify, reject),
        # then one unit many times: the head, the unit twice and the count.
        for head in range(1, min(_HEAD, len(tail))):
            unit = _period(tail[head:])
            if unit is not None:
                times = (len(tail) - head) // len(unit)
                shown = tail[:head + 2 * len(unit)]
                more = f" -> ... ({' -> '.join(unit)}: {times} times)" if times > 2 else ""
                return " -> ".join(shown) + more
        unit = tail
    states = ["verify" if t == "retry" else t for t in unit]
    return " -> ".join([*states, states[0]]) if states else ""


_HEAD = 4  # the longest head before a cycle that name_cycle looks past


def _period(tail: list[str]) -> list[str] | None:
    """The shortest unit `tail` repeats (at least twice), or None."""
    for period in range(1, len(tail) // 2 + 1):
        if all(tail[i] == tail[i + period] for i in range(len(tail) - period)):
            return tail[:period]
    return None


class RestoreStorms:
    """Tracks each round's restores by position; rounds with repeats become findings.

    It reads a round's begin, restores, guard and commit, never its other steps (nearly
    every event of a session is one, and following them cost a fifth of a 1M-event
    postmortem): a storm's redo time is the log's clock from its first repeated restore to
    the round's end, and the cycle a finding names is read back from the log (`path_of`)
    for the one or two rounds that name one."""

    def __init__(self, config: dict[str, Any], path_of: PathOf) -> None:
        self.replay_policy = config.get("replay_policy", "?")
        self.guard_limit = config.get("livelock_guard")
        self.path_of = path_of
        self._open: dict[int, _Round] = {}
        self.storms: list[_Round] = []
        self.restores = 0
        self.committed = 0

    def handlers(self) -> dict[Trigger, Handler]:
        """BEGIN (or a DECODE outside a round) opens a slot's round, COMMIT ends it.

        Bound once as closures over the open rounds: a handler does no attribute lookups
        it can avoid."""
        opened = self._open
        get = opened.get

        def open_round(row: Row, _: object) -> None:
            seq = row[SEQ]
            # Positional: keywords cost a third of the round's construction.
            opened[row[SLOT]] = _Round(row[SLOT], row[TURN], row[ROUND], seq, seq, {}, 0,
                                       0.0, 0.0, None, False)

        def on_decode(row: Row, _: object) -> None:
            if row[SLOT] not in opened:
                open_round(row, _)

        def on_restore(row: Row, restore: Restore) -> None:
            r = get(row[SLOT])
            if r is None:
                return
            r.last_seq = row[SEQ]
            self.restores += 1
            restores = r.restores
            pos = restore["position"]
            n = restores[pos] = restores.get(pos, 0) + 1
            if n > 1:
                if r.repeats < 2:  # the round's first repeated restore: its redo begins
                    r.redo_from = row[TIME] - row[DURATION]
                r.repeats = max(r.repeats, n)
                r.redo_s = row[TIME] - r.redo_from

        def on_livelock(row: Row, guard: Livelock) -> None:
            r = get(row[SLOT])
            if r is not None:
                r.last_seq = row[SEQ]
                r.guard = guard

        def on_commit(row: Row, commit: Commit) -> None:
            slot = row[SLOT]
            r = get(slot)
            if r is None:
                return
            self.committed += len(commit["append"])
            if r.repeats > 1 or r.guard is not None:
                r.last_seq = row[SEQ]
                if r.repeats > 1:
                    r.redo_s = row[TIME] - r.redo_from
                self.storms.append(opened.pop(slot))
            else:  # the common case: a round without a storm leaves no trace
                del opened[slot]

        return {Trigger.BEGIN: open_round, Trigger.DECODE: on_decode,
                Trigger.RESTORE: on_restore, Trigger.LIVELOCK: on_livelock,
                Trigger.COMMIT: on_commit}

    def finish(self) -> list[Finding]:
        """A livelock finding (error) and a storm finding (warning), as the rounds show."""
        for r in self._open.values():  # a round the log ends inside never made progress
            if r.repeats > 1 or r.guard is not None:
                r.unfinished = r.repeats > 1
                self.storms.append(r)
        self._open.clear()
        locked = [r for r in self.storms if r.locked]
        stormy = [r for r in self.storms if not r.locked]
        kinds = ((locked, Kind.REPLAY_LIVELOCK, Severity.ERROR),
                 (stormy, Kind.RESTORE_STORM, Severity.WARNING))
        return [self._finding(rounds, kind, severity) for rounds, kind, severity in kinds
                if rounds]

    def _finding(self, rounds: list[_Round], kind: Kind, severity: Severity) -> Finding:
        first = rounds[0]
        cycle = first.guard["cycle"] if first.guard is not None else None
        named = " -> ".join([*cycle, cycle[0]]) if cycle else name_cycle(
            self.path_of(first.slot, first.first_seq, first.last_seq))
        storm_restores = sum(sum(r.restores.values()) for r in rounds)
        pos, worst = max((r.worst for r in rounds), key=lambda w: w[1])
        per_token = self.restores / self.committed if self.committed else float("inf")
        numbers = {
            "rounds": len(rounds), "restores": self.restores,
            "restores_in_these_rounds": storm_restores, "committed_tokens": self.committed,
            "restores_per_committed_token": round(per_token, 3),
            "worst_position": pos, "worst_restores": worst, "cycle": named,
            "redo_s": round(sum(r.redo_s for r in rounds), 6),
            "replay_policy": self.replay_policy, "livelock_guard": self.guard_limit,
            "per_round": examples([{"slot": r.slot, "turn": r.turn, "round": r.round,
                                    "seq": [r.first_seq, r.last_seq],
                                    "restores": sum(r.restores.values()),
                                    "guard": r.locked} for r in rounds]),
        }
        what = ("the forward-progress guard had to end" if kind is Kind.REPLAY_LIVELOCK
                else "went round without the guard firing in")
        text = (f"{len(rounds)} round(s) restored the same checkpoint repeatedly without "
                f"progress (worst: {worst} restores at position {pos}); {what} them. The "
                f"cycle: {named}. {self.restores} restores for {self.committed} committed "
                f"tokens in the session ({per_token:.2f} per token).")
        if self.replay_policy == "reverify":
            text += (" The replay verified again (replay_policy reverify) and, with "
                     "batch-shape-dependent numerics, disagreed with the verification.")
        return Finding(
            kind, severity, first.first_seq, rounds[-1].last_seq, text, ADVICE[kind],
            numbers, first.slot, first.turn, first.round)
