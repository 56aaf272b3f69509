"""The one fold from a session's events to what its readers show, in one pass: the turns'
records (eventlog/turn_fold.py: each turn's committed tokens, the metrics END_TURN recorded
and the same counted again from the events, its draft rounds) and, beside them, each
slot's projection (its state at any seq) and the rounds' phase times, holding only the
slots and their open turns. A slot's view sums the turns' counts; it counts nothing
itself."""

from collections.abc import Callable, Collection, Iterable

from sqlalchemy import Engine

from eventlog.reader import paused_gc, scan_rows
from eventlog.records import SlotView, TurnRecord
from eventlog.turn_fold import Payload, TurnsFold
from fsm.event import APPEND, DIGEST, POSITION, TRIM, Event
from fsm.states import TRANSITIONS, RoundState, Trigger
from fsm.turn_metrics import TurnMetrics

STEPS: dict[Trigger, str] = {
    Trigger.BEGIN: "checkpoint", Trigger.DRAFT: "draft", Trigger.VERIFY: "verify",
    Trigger.RETRY: "verify", Trigger.DECODE: "verify", Trigger.RESTORE: "restore",
    Trigger.REPLAY: "replay", Trigger.COMMIT: "commit", Trigger.PREFILL: "prefill",
    Trigger.CTX_SAVE: "ctx_save", Trigger.CTX_RESTORE: "ctx_restore",
}
"""The triggers of timed events, each with the step its duration times (a retry or a decode
verifies)."""
TURN_STEPS = frozenset({Trigger.PREFILL, Trigger.CTX_SAVE, Trigger.CTX_RESTORE})
"""The steps timed outside rounds, at the level of their turn."""
PHASES: dict[Trigger, str] = {
    t: "rollback" if step in ("restore", "replay") else step
    for t, step in STEPS.items() if t not in TURN_STEPS}
"""The phase of a round each of its steps' durations counts to (restoring and replaying
both roll back)."""
DEST: dict[str, RoundState] = {t: dest for t, _, dest in TRANSITIONS if dest is not None}
"""Each trigger's destination state; a note (which stays in its state) has none."""
_VIOLATION = Trigger.INVARIANT_VIOLATION
_count = TurnsFold.step  # looked up once: it runs per event


class LogFold(TurnsFold):
    """The turns' fold (`TurnsFold`: `records`, `on_close`) and each slot's projection:
    `slots` (slot number -> `SlotView`), and each turn's phase times."""

    __slots__ = ("slots",)

    def __init__(self, on_close: Callable[[TurnRecord], None] | None = None) -> None:
        super().__init__(on_close)
        self.slots: dict[int, SlotView] = {}

    def step(self, seq: int, slot: int, turn: int, rnd: int, trigger: str,
             dest: RoundState | None, t: float, d: float, p: Payload) -> TurnRecord:
        """Fold one event given as its fields (`dest` None: the state stays, as after a
        note); returns the record of the turn it belongs to."""
        rec = _count(self, seq, slot, turn, rnd, trigger, dest, t, d, p)
        v = self.slots[slot]
        if p:
            # Order matters: an event may cut the tokens back and then append to the cut.
            if TRIM in p:
                del v.tokens[p[TRIM]:]
            if APPEND in p:
                v.tokens.extend(p[APPEND])
            if POSITION in p:
                v.position = p[POSITION]
            if DIGEST in p:
                v.digest = p[DIGEST]
        if trigger == _VIOLATION:
            v.violations.append(p)
        if dest is not None:
            v.state = dest
        v.turn, v.round = turn, rnd
        phase = PHASES.get(trigger)
        if phase is not None:
            rec.phase_s[phase] = rec.phase_s.get(phase, 0.0) + d
        return rec

    def _began(self, slot: int, counts: TurnMetrics) -> None:
        v = self.slots.get(slot)
        if v is None:
            v = self.slots[slot] = SlotView(slot)
        v.next_turn(counts)


def fold_log(events: Iterable[Event], on_close: Callable[[TurnRecord], None] | None = None
             ) -> LogFold:
    """`events` folded, in order."""
    fold = LogFold(on_close)
    apply = fold.apply
    for ev in events:
        apply(ev)
    return fold


def fold_session(engine: Engine, session_id: int, fold: LogFold | None = None, *,
                 upto_seq: int | None = None, triggers: Collection[Trigger] | None = None,
                 timings: bool = True, after_seq: int | None = None) -> LogFold:
    """The stored session's events (after `after_seq`, through `upto_seq`; only
    `triggers`' when given) folded into `fold` (a new `LogFold` by default; without
    `timings`, every time is folded as 0)."""
    fold = LogFold() if fold is None else fold
    step, dest = fold.step, DEST.get
    with paused_gc():
        for rows in scan_rows(engine, session_id, triggers=triggers, upto_seq=upto_seq,
                              after_seq=after_seq):
            for seq, slot, turn, rnd, trigger, d, _source, t, p, _dest in rows:
                if not timings:
                    t = d = 0.0
                step(seq, slot, turn, rnd, trigger, dest(trigger), t, d, p)
    return fold

