"""A session as a timeline: the records both trace formats (Perfetto, Chrome) are written from.

One track per slot. On it every turn is a slice, every round a slice inside its turn, and
every timed event a slice inside its round (the round's phases: checkpoint, draft,
verify, restore, replay, commit) or, outside rounds, inside its turn (prefill, context
checkpoint save and restore), with the event's payload as its arguments. An event's `t`
is when its work ended and `duration` how long it took, so its slice spans
[t - duration, t] on the backend's clock. Each postmortem finding is an instant at the
event where it begins; two counters per slot follow each round's acceptance and the bytes
its checkpoint holds. Records come out in time order per slot, in one pass over the events.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from eventlog.fold import STEPS, TURN_STEPS
from eventlog.postmortem import Finding
from fsm.event import Event
from fsm.states import Trigger

T = Trigger
ROUND_LEVEL = frozenset(STEPS) - TURN_STEPS
"""The timed events whose slices sit inside a round (a step's slice is named `STEPS[trigger]`)."""


class Level(StrEnum):
    """Where a slice sits: a turn holds rounds and turn-level phases, a round its phases."""

    TURN = "turn"
    ROUND = "round"
    PHASE = "phase"


class CounterKind(StrEnum):
    """The per-slot counters."""

    ACCEPTANCE = "acceptance"              # accepted / drafted, at each round's commit
    CHECKPOINT_BYTES = "checkpoint bytes"  # held by the round's checkpoint; 0 between rounds


@dataclass(frozen=True, slots=True)
class SliceBegin:
    """A slice opens on `slot`'s track at `ts` ns."""

    slot: int
    ts: int
    name: str
    level: Level
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SliceEnd:
    """The innermost open slice on `slot`'s track closes at `ts` ns; `args` add to its own."""

    slot: int
    ts: int
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Instant:
    """A postmortem finding, marked on `slot`'s track at `ts` ns."""

    slot: int
    ts: int
    name: str
    args: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CounterValue:
    """A counter of `slot` takes `value` at `ts` ns."""

    slot: int
    ts: int
    kind: CounterKind
    value: float


Record = SliceBegin | SliceEnd | Instant | CounterValue


def to_ns(seconds: float) -> int:
    """Integer nanoseconds, the traces' unit."""
    return round(seconds * 1e9)


@dataclass
class _Track:
    """One slot's open slices and its time cursor: the latest begin or end written. Nothing
    starts before the cursor, so a rounding nanosecond cannot break the nesting."""

    cursor: int = 0
    open: list[Level] = field(default_factory=list)
    turn: int | None = None
    round: int | None = None
    drafted: int = 0
    outcome: str = ""

    def at(self, ts: int) -> int:
        """`ts`, or the cursor if `ts` is earlier; the cursor moves there."""
        self.cursor = max(ts, self.cursor)
        return self.cursor


class _Folder:
    """Turns events into records, slot by slot."""

    def __init__(self) -> None:
        self.tracks: dict[int, _Track] = {}

    def feed(self, ev: Event) -> Iterator[Record]:
        """The records one event adds."""
        tr = self.tracks.setdefault(ev.slot, _Track())
        slot, trig, t = ev.slot, ev.trigger, to_ns(ev.t)
        start = t - to_ns(ev.duration)
        if trig is T.START_TURN or (ev.turn > 0 and tr.turn != ev.turn):
            yield from self._close(slot, tr, Level.TURN, start)
            tr.turn = ev.turn
            tr.open.append(Level.TURN)
            args = {"turn": ev.turn, **(ev.payload if trig is T.START_TURN else {})}
            yield SliceBegin(slot, tr.at(start), f"turn {ev.turn}", Level.TURN, args)
        if trig in ROUND_LEVEL and tr.round != ev.round:
            yield from self._close(slot, tr, Level.ROUND, start)
            tr.round, tr.drafted, tr.outcome = ev.round, 0, ""
            tr.open.append(Level.ROUND)
            yield SliceBegin(slot, tr.at(start), f"round {ev.round}", Level.ROUND,
                             {"turn": ev.turn, "round": ev.round})
        elif trig in TURN_STEPS:
            yield from self._close(slot, tr, Level.ROUND, start)
        if trig in STEPS:
            yield SliceBegin(slot, tr.at(start), STEPS[trig], Level.PHASE,
                             {"seq": ev.seq, "trigger": trig.value, **ev.payload})
            yield SliceEnd(slot, tr.at(t))
        yield from self._note(ev, tr, t)

    def _note(self, ev: Event, tr: _Track, t: int) -> Iterator[Record]:
        """What the untimed events and the phases' payloads add: counters and outcomes."""
        trig, p, slot = ev.trigger, ev.payload, ev.slot
        if trig is T.BEGIN:
            yield CounterValue(slot, tr.at(t), CounterKind.CHECKPOINT_BYTES, p.get("bytes", 0))
        elif trig is T.VERIFY or trig is T.DECODE:
            tr.drafted = p.get("drafted", 0)
        elif trig is T.ACCEPT or trig is T.REJECT:
            tr.outcome = trig.value
        elif trig is T.COMMIT and tr.drafted:
            yield CounterValue(slot, tr.at(t), CounterKind.ACCEPTANCE,
                               p.get("accepted", 0) / tr.drafted)
        elif trig is T.NEXT:
            yield from self._close(slot, tr, Level.ROUND, tr.cursor)
        elif trig is T.END_TURN:
            yield from self._close(slot, tr, Level.TURN, t, p)

    def _close(self, slot: int, tr: _Track, level: Level, ts: int,
               args: dict[str, Any] | None = None) -> Iterator[Record]:
        """Close the open slices down to and including the innermost `level` one, if any
        is open; `args` go to that one."""
        if level not in tr.open:
            return
        while tr.open:
            closing = tr.open.pop()
            at = tr.at(ts)
            if closing is Level.ROUND:
                yield SliceEnd(slot, at, {"outcome": tr.outcome or "none",
                                          "drafted": tr.drafted})
                yield CounterValue(slot, at, CounterKind.CHECKPOINT_BYTES, 0)
                tr.round = None
            else:
                yield SliceEnd(slot, at, dict(args or {}) if closing is level else {})
                tr.turn = None
            if closing is level:
                return

    def finish(self) -> Iterator[Record]:
        """Close whatever the log left open (a writer that died mid-turn)."""
        for slot, tr in self.tracks.items():
            yield from self._close(slot, tr, Level.TURN, tr.cursor)


def finding_args(f: Finding) -> dict[str, Any]:
    """A finding as instant arguments."""
    return {"kind": f.kind.value, "severity": f.severity.value,
            "seq": [f.first_seq, f.last_seq], "explanation": f.explanation, "fix": f.fix,
            "numbers": f.numbers}


def timeline(events: Iterable[Event], findings: Iterable[Finding] = ()) -> Iterator[Record]:
    """The records of `events` in one pass; each finding an instant on the track of the
    event where it begins (or of the last event, for one past the end of the log)."""
    folder = _Folder()
    pending = sorted(findings, key=lambda f: f.first_seq)
    last: Event | None = None
    for ev in events:
        yield from folder.feed(ev)
        while pending and pending[0].first_seq <= ev.seq:
            yield _instant(pending.pop(0), ev, folder)
        last = ev
    if last is not None:
        for f in pending:
            yield _instant(f, last, folder)
    yield from folder.finish()


def _instant(f: Finding, ev: Event, folder: _Folder) -> Instant:
    track = folder.tracks[ev.slot]
    return Instant(ev.slot, track.at(to_ns(ev.t)), f"{f.severity.value}: {f.kind.value}",
                   finding_args(f))
