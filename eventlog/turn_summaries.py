"""Each ended turn as one row of the `turns` table, so that a session's turn table costs a
row per turn to read instead of a fold over all of its rounds.

The recorder folds the events it is handed with the one fold (eventlog/fold.py), or takes
the turns our engine's live fold closes (`TurnSummaries.handed`), and writes a turn's
summary in the transaction that writes the turn's END_TURN: the metrics END_TURN carries,
the turn's draft rounds counted by (drafted, accepted), and how many of the session's
events are the turn's. A reader takes a session's summaries only where they hold every
event the session stored, read in one snapshot: then no turn is open and nothing lies
outside a turn. Where the events no summary holds all follow the latest turn's end (a live
session's turns in progress, or a cut session's last), the reader folds only those; where
not (a session an older writer recorded), the whole session.
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import takewhile
from typing import Any

from sqlalchemy import Engine, func, inspect, select

from eventlog.db import snapshot
from eventlog.records import TurnRecord
from eventlog.schema import events, sessions, turns
from eventlog.turn_fold import TurnsFold
from fsm.event import Event

SummaryRow = dict[str, Any]


class TurnSummaries:
    """The writer's side: folds each event as it is appended (the turns only, no slot
    views); holds the rows of the turns that ended until the events through their END_TURN
    are written."""

    __slots__ = ("_fold", "_pending", "apply", "session_id")

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self._fold = TurnsFold(self._closed)
        self._pending: list[SummaryRow] = []
        self.apply = self._fold.apply  # fold one appended event

    def handed(self) -> Callable[[TurnRecord], None]:
        """Stop folding: the appender folds the events itself and hands each turn it closes
        to the callable returned (the engine's `TurnFold`, which folds them alike)."""
        self.apply = _folded_already
        return self._closed

    def _closed(self, rec: TurnRecord) -> None:
        drafts = Counter(rec.drafts)
        self._pending.append({
            "session_id": self.session_id, "end_seq": rec.last_seq, "slot": rec.slot,
            "turn": rec.turn, "events": rec.events,
            "body": {"metrics": rec.metrics,
                     "drafts": [[k, a, n] for (k, a), n in sorted(drafts.items())]},
        })

    def through(self, seq: int) -> list[SummaryRow]:
        """The rows of the turns whose END_TURN is at or before `seq`, to store with the
        events through `seq`; they stay until `stored` says they were."""
        return list(takewhile(lambda row: row["end_seq"] <= seq, self._pending))

    def stored(self, n: int) -> None:
        """The first `n` rows `through` gave are in the ledger."""
        del self._pending[:n]


def _folded_already(_ev: Event) -> None:
    """The appender hands the turns it folded (`TurnSummaries.handed`)."""


@dataclass(frozen=True)
class StoredTurns:
    """A session's turns as its summaries give them: those that ended, in the order they
    ended, as records holding what a summary keeps (END_TURN's metrics and the draft
    rounds); and `open_after`, the seq after which every event no summary holds lies (the
    turns still open: fold the events after it), or None where there is none."""

    ended: list[TurnRecord]
    open_after: int | None


def read_summaries(engine: Engine, session_id: int) -> StoredTurns | None:
    """The session's turns from its summaries, read in one snapshot; None where they cannot
    tell them (the ledger has no summaries, an ended turn has none, or a turn still open
    began before the latest turn ended): fold the whole session instead. A session without
    summaries at all is all tail: no ended turns, every event after seq 0."""
    with snapshot(engine) as conn:
        if not inspect(conn).has_table(turns.name):
            return None
        stored = conn.scalar(select(sessions.c.n_events).where(sessions.c.id == session_id))
        rows = conn.execute(select(turns.c.slot, turns.c.turn, turns.c.events, turns.c.body,
                                   turns.c.end_seq)
                            .where(turns.c.session_id == session_id)
                            .order_by(turns.c.end_seq)).all()
        rest = (stored or 0) - sum(r.events for r in rows)
        last_end = rows[-1].end_seq if rows else 0
        after = conn.scalar(select(func.count()).where(
            events.c.session_id == session_id, events.c.seq > last_end)) if rest else 0
    if stored is None or rest != after:
        return None
    ended = [TurnRecord(r.slot, r.turn, metrics=r.body["metrics"],
                        drafts=_rounds(r.body["drafts"])) for r in rows]
    return StoredTurns(ended, last_end if rest else None)


def _rounds(counted: list[list[int]]) -> list[tuple[int, int]]:
    """The (drafted, accepted) rounds a summary counts, as a list again."""
    return [(k, a) for k, a, n in counted for _ in range(n)]
