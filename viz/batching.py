"""Which rounds shared a target forward: the batched schedule's forwards read back from
the events (docs/events.md: `batch_id`, `batch_slots`, `batch_tokens` on VERIFY, DECODE and
RETRY), and what they add up to (forwards shared, slots and tokens per forward, each slot's
share). A session under the sequential schedule carries none of the fields: no forwards.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from fsm.event import Event
from fsm.states import Trigger

BATCH_ID, BATCH_SLOTS, BATCH_TOKENS = "batch_id", "batch_slots", "batch_tokens"
FORWARD_TRIGGERS = frozenset((Trigger.VERIFY, Trigger.DECODE, Trigger.RETRY))
"""The events that are a slot's rows in a target forward."""


@dataclass(frozen=True)
class Row:
    """One slot's rows in one forward: which round put them there, how, and how many
    tokens (the event's `batch`)."""

    slot: int
    turn: int
    round: int
    trigger: Trigger
    tokens: int
    seq: int


@dataclass
class Forward:
    """One shared target forward: `slots` and `tokens` as its events record them, and the
    rows of it found in the log (fewer where a log was cut inside it)."""

    batch_id: int
    slots: int
    tokens: int
    rows: list[Row] = field(default_factory=list)

    @property
    def shared(self) -> bool:
        """Whether the forward held more than one slot's rows."""
        return self.slots > 1


class ForwardCollector:
    """Gathers the forwards of a stream of events, one event at a time (so a caller that
    folds the events for something else reads them once)."""

    def __init__(self) -> None:
        self.forwards: dict[int, Forward] = {}

    def add(self, ev: Event) -> None:
        """Take one event; only a forward trigger with a `batch_id` counts."""
        if ev.trigger not in FORWARD_TRIGGERS:
            return
        p = ev.payload
        bid = p.get(BATCH_ID)
        if bid is None:
            return  # the sequential schedule: a forward of this slot alone, unnumbered
        fwd = self.forwards.get(bid)
        if fwd is None:
            fwd = self.forwards[bid] = Forward(bid, p.get(BATCH_SLOTS, 1),
                                               p.get(BATCH_TOKENS, 0))
        fwd.rows.append(Row(ev.slot, ev.turn, ev.round, ev.trigger, p.get("batch", 0),
                            ev.seq))


def collect_forwards(events: Iterable[Event]) -> dict[int, Forward]:
    """The forwards of `events` by batch id (empty: a sequential session)."""
    c = ForwardCollector()
    for ev in events:
        c.add(ev)
    return c.forwards


@dataclass(frozen=True)
class SlotShare:
    """One slot's part in the forwards: how many held its rows, how many of those it
    shared with another slot, its tokens and their share of all forwards' tokens."""

    slot: int
    forwards: int
    shared: int
    tokens: int
    token_share: float


@dataclass(frozen=True)
class BatchSummary:
    """The forwards of a session, summed: how many, how many shared, slots and tokens per
    forward, the share of slot rows that rode in a shared forward, and each slot's part."""

    forwards: int
    shared: int
    mean_slots: float
    max_slots: int
    mean_tokens: float
    rows: int
    shared_rows: int
    slots: list[SlotShare]

    @property
    def shared_share(self) -> float:
        """Shared forwards over all forwards."""
        return self.shared / self.forwards if self.forwards else 0.0


def summarize(forwards: dict[int, Forward]) -> BatchSummary | None:
    """The summary of `forwards`; None when there are none (a sequential session)."""
    if not forwards:
        return None
    fwds = list(forwards.values())
    total = sum(f.tokens for f in fwds)
    by_slot: dict[int, list[tuple[Forward, Row]]] = defaultdict(list)
    for f in fwds:
        for r in f.rows:
            by_slot[r.slot].append((f, r))
    slots = []
    for slot in sorted(by_slot):
        rows = by_slot[slot]
        tokens = sum(r.tokens for _, r in rows)
        slots.append(SlotShare(slot, len({f.batch_id for f, _ in rows}),
                               len({f.batch_id for f, _ in rows if f.shared}), tokens,
                               tokens / total if total else 0.0))
    return BatchSummary(
        forwards=len(fwds), shared=sum(f.shared for f in fwds),
        mean_slots=sum(f.slots for f in fwds) / len(fwds), max_slots=max(f.slots for f in fwds),
        mean_tokens=total / len(fwds), rows=sum(len(f.rows) for f in fwds),
        shared_rows=sum(1 for f in fwds if f.shared for _ in f.rows), slots=slots)
