"""The one fold from a session's events to what its readers show, in one pass: each slot's
state at any seq (the projection) and each turn's record (its committed tokens, the metrics
END_TURN recorded and the same counted again from the events, its draft rounds and phase
times), holding only the slots and their open turns.

The counted metrics are the engine's `TurnMetrics`: a live run folds its events as it fires
them (engine/metrics.py, `TurnFold`) and records the counts in END_TURN, so a stored log's
fold agrees with END_TURN, timings included (tests/eventlog/test_fold.py)."""

from collections.abc import Callable, Collection, Iterable
from typing import Any

from sqlalchemy import Engine

from eventlog.reader import paused_gc, scan_rows
from eventlog.records import SlotView, TurnRecord
from fsm.event import APPEND, DIGEST, POSITION, TRIM, Event
from fsm.states import TRANSITIONS, RoundState, Trigger
from fsm.turn_counts import TurnCounts

TurnKey = tuple[int, int]
Payload = dict[str, Any]

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
_T = Trigger
_RESTORE, _VERIFY, _DRAFT, _COMMIT, _REJECT, _ACCEPT, _RETRY, _LIVELOCK, _DECODE = (
    _T.RESTORE, _T.VERIFY, _T.DRAFT, _T.COMMIT, _T.REJECT, _T.ACCEPT, _T.RETRY, _T.LIVELOCK,
    _T.DECODE)
_PREFILL, _START_TURN, _CTX_RESTORE, _VIOLATION, _END_TURN = (
    _T.PREFILL, _T.START_TURN, _T.CTX_RESTORE, _T.INVARIANT_VIOLATION, _T.END_TURN)
_QUIET = frozenset({_T.BEGIN, _T.NEXT, _T.REPLAY})
"""A round's triggers that count nothing (the commonest, so looked up first)."""


class LogFold:
    """Folds events one at a time into `slots` (slot number -> `SlotView`) and the turns'
    `records`, keyed by (slot, turn) in the order turns began. With `on_close`, a turn
    leaves `records` at its END_TURN and goes there instead. Without `views`, it folds only
    the turns' counts and drafts: no slot views, no phase times (a live run's metrics)."""

    __slots__ = ("_on_close", "_open", "_views", "_void", "records", "seq", "slots")

    def __init__(self, on_close: Callable[[TurnRecord], None] | None = None, *,
                 views: bool = True) -> None:
        self.slots: dict[int, SlotView] = {}
        self.records: dict[TurnKey, TurnRecord] = {}
        self.seq = 0  # the latest event's
        self._on_close = on_close
        self._views = views
        self._open: dict[int, TurnRecord] = {}  # each slot's latest turn
        self._void = TurnRecord(0, 0)  # what events before a slot's first turn feed

    def apply(self, ev: Event) -> None:
        """Fold one event."""
        self.step(ev.seq, ev.slot, ev.turn, ev.round, ev.trigger, ev.dest, ev.t, ev.duration,
                  ev.payload)

    def step(self, seq: int, slot: int, turn: int, rnd: int, trigger: str,
             dest: RoundState | None, t: float, d: float, p: Payload) -> None:
        """Fold one event given as its fields (`dest` None: the state stays, as after a
        note)."""
        self.seq = seq
        rec = self._open.get(slot)
        if rec is None or rec.turn != turn:
            rec = self._begin(slot, turn, seq)
        rec.last_seq = seq
        rec.events += 1
        if rnd != rec.round_no:
            rec.round_no, rec.round_t, rec.round_k, rec.round_eog = rnd, rec.t, -1, None
        v: SlotView | None = None
        if self._views:
            v = self.slots.get(slot)
            if v is None:
                v = self.slots[slot] = SlotView(slot)
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
            if dest is not None:
                v.state = dest
            v.turn, v.round = turn, rnd
            phase = PHASES.get(trigger)
            if phase is not None:
                rec.phase_s[phase] = rec.phase_s.get(phase, 0.0) + d
        st = rec.stats
        # Every figure is computed as the engine computes it (engine/turn.py, round.py),
        # from the same clock readings, so that on the sim the floats agree to the last bit.
        # The triggers go by how often a round fires them; a view is there only with views.
        if trigger in _QUIET:
            pass
        elif trigger == _VERIFY:
            k = int(p.get("drafted") or len(p.get("drafts", ())))
            st.drafted += k
            rec.verifies += 1
            rec.round_k = k
            if v is not None:
                v.drafted += k
        elif trigger == _COMMIT:
            if rec.rollback_t is not None:
                _rolled_back(rec)
            accepted = p.get("accepted") or 0
            st.rounds += 1
            st.accepted += accepted
            st.decode_s += t - rec.round_t
            if rec.round_k >= 0:
                rec.drafts.append((rec.round_k, accepted))
            if rec.round_eog is not None and rec.answer_end is None:
                rec.answer_end = len(rec.committed) + rec.round_eog + 1
            _committed(rec, p)
            if v is not None:
                v.rounds += 1
                v.accepted += accepted
        elif trigger == _DRAFT:
            rec.round_k = 0
        elif trigger == _REJECT:
            rec.round_eog = p.get("eog")
            rec.rollback_t = t
        elif trigger == _RESTORE:
            st.restores += 1
            if v is not None:
                v.restores += 1
        elif trigger == _ACCEPT:
            rec.round_eog = p.get("eog")
        elif trigger == _VIOLATION:
            st.violations += 1
            if v is not None:
                v.violations.append(p)
        elif trigger == _RETRY:
            _rolled_back(rec)
        elif trigger == _LIVELOCK:
            st.livelocks += 1
        elif trigger == _DECODE:
            if v is not None:
                v.drafted += p.get("drafted", 0)
        elif trigger == _PREFILL:
            _prefill(rec, p, d)
        elif trigger == _START_TURN:
            st.prompt_tokens = p.get("prompt_tokens", 0)
            st.kept_tokens = p.get("kept", 0)
            st.f_keep = p.get("f_keep", 1.0)
        elif trigger == _CTX_RESTORE:
            n = p.get("reprefill", 0)
            st.ctx_restores += 1
            st.reprefill_tokens += n
            st.repair_s += d
            if v is not None:
                v.ctx_restores += 1
                v.reprefill_tokens += n
        elif trigger == _END_TURN:
            rec.metrics = p.get("metrics")
            self._close(rec)
        rec.t = t

    def _begin(self, slot: int, turn: int, seq: int) -> TurnRecord:
        if turn == 0:
            return self._void  # nothing belongs to a turn before the first one starts
        rec = self.records[(slot, turn)] = self._open[slot] = TurnRecord(
            slot, turn, first_seq=seq, stats=TurnCounts(slot, turn))
        return rec

    def counts(self, slot: int) -> TurnCounts:
        """The counts of `slot`'s open turn as its END_TURN would close them now (what
        the engine records in END_TURN's metrics)."""
        rec = self._open[slot]
        _answered(rec)
        return rec.stats

    def _close(self, rec: TurnRecord) -> None:
        _answered(rec)
        if self._on_close is not None and rec is not self._void:
            self._on_close(self.records.pop((rec.slot, rec.turn)))


def _answered(rec: TurnRecord) -> None:
    """The turn's answer and stray tokens: what it committed through its first EOG, and
    what followed."""
    st = rec.stats
    n = len(rec.committed)
    st.generated_tokens = n if rec.answer_end is None else rec.answer_end
    st.stray_tokens = n - st.generated_tokens


def _prefill(rec: TurnRecord, p: Payload, d: float) -> None:
    st = rec.stats
    n = p.get("tokens", 0)
    st.prefill_tokens += n
    st.prefill_s += d
    cut = p.get(POSITION)
    if n and cut is not None:  # the re-prefilled history's share of the chunk, by tokens
        pos = cut - n
        if rec.prefill_from is None:
            rec.prefill_from = pos
        repeated_end = rec.prefill_from + st.reprefill_tokens
        st.reprefill_s += d * max(0, min(cut, repeated_end) - pos) / (cut - pos)
    _committed(rec, p)


def _committed(rec: TurnRecord, p: Payload) -> None:
    block = p.get(APPEND)
    if block:
        rec.committed.extend(block)
        rec.marks.append((len(rec.committed), rec.last_seq))


def _rolled_back(rec: TurnRecord) -> None:
    """A rollback ends where the next verification or the commit begins."""
    if rec.rollback_t is not None:
        rec.stats.rollback_s += rec.t - rec.rollback_t
        rec.rollback_t = None


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

