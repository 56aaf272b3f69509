"""The turns' half of the one fold (eventlog/fold.py): each turn's record, its counts kept
once, by a table of handlers by trigger; each open turn's scratch state (its current
round, the rollback in progress) private to the fold.

The counts are the engine's `TurnMetrics`: a live run folds its events as it fires them
(engine/metrics.py, `TurnFold`) and records the counts in END_TURN, so a stored log's fold
agrees with END_TURN, timings included (tests/eventlog/test_fold.py). Every figure is
computed as the engine computes it (engine/turn.py, round.py), from the same clock
readings, so that on the sim the floats agree to the last bit."""

from collections.abc import Callable
from typing import Any

from eventlog.records import TurnKey, TurnRecord
from fsm.event import APPEND, POSITION, Event
from fsm.states import RoundState, Trigger
from fsm.turn_metrics import TurnMetrics

Payload = dict[str, Any]


class _Turn:
    """A slot's open turn: its public record and counts, and what the fold needs between
    its events."""

    __slots__ = ("answer_end", "close", "prefill_from", "rec", "rollback_t", "round_eog",
                 "round_k", "round_no", "round_t", "stats", "t", "turn")

    def __init__(self, rec: TurnRecord, close: Callable[[TurnRecord], None]) -> None:
        self.rec, self.stats, self.turn = rec, rec.stats, rec.turn
        self.close = close  # what its END_TURN hands the record to
        self.t = 0.0  # the time of the turn's latest event
        self.round_no = 0
        self.round_t = 0.0  # when the round began: the time of the event before it
        self.round_k = -1  # the round's draft size at its first verification; -1: no draft
        self.round_eog: int | None = None  # where the latest verdict saw an EOG in the block
        self.rollback_t: float | None = None  # when the rollback in progress began
        self.prefill_from: int | None = None  # where the turn's prefill began
        self.answer_end: int | None = None  # committed tokens through the first EOG


class TurnsFold:
    """Folds events one at a time into the turns' `records`, keyed by (slot, turn) in the
    order turns began. With `on_close`, a turn leaves `records` at its END_TURN and goes
    there instead. Events before a slot's first turn count to a turn 0 of its own, kept
    in no record."""

    __slots__ = ("_on_close", "_open", "records", "seq")

    def __init__(self, on_close: Callable[[TurnRecord], None] | None = None) -> None:
        self.records: dict[TurnKey, TurnRecord] = {}
        self.seq = 0  # the latest event's
        self._on_close = on_close
        self._open: dict[int, _Turn] = {}  # each slot's latest turn

    def apply(self, ev: Event) -> None:
        """Fold one event."""
        self.step(ev.seq, ev.slot, ev.turn, ev.round, ev.trigger, ev.dest, ev.t, ev.duration,
                  ev.payload)

    def step(self, seq: int, slot: int, turn: int, rnd: int, trigger: str,
             dest: RoundState | None, t: float, d: float, p: Payload) -> TurnRecord:
        """Fold one event given as its fields (`dest` None: the state stays, as after a
        note); returns the record of the turn it belongs to."""
        self.seq = seq
        o = self._open.get(slot)
        if o is None or o.turn != turn:
            o = self._begin(slot, turn, seq)
        rec = o.rec
        rec.last_seq = seq
        rec.events += 1
        if rnd != o.round_no:
            o.round_no, o.round_t, o.round_k, o.round_eog = rnd, o.t, -1, None
        handle = COUNTERS.get(trigger)
        if handle is not None:
            handle(o, p, t, d)
        o.t = t
        return rec

    def _begin(self, slot: int, turn: int, seq: int) -> _Turn:
        rec = TurnRecord(slot, turn, first_seq=seq, stats=TurnMetrics(slot, turn))
        if turn:  # nothing belongs to a turn before the first one starts
            self.records[(slot, turn)] = rec
        o = self._open[slot] = _Turn(rec, self.close)
        self._began(slot, rec.stats)
        return o

    def _began(self, slot: int, counts: TurnMetrics) -> None:
        """`slot`'s next turn began, counting into `counts` (a hook: nothing here)."""

    def counts(self, slot: int) -> TurnMetrics:
        """The counts of `slot`'s open turn (what the engine records in END_TURN's
        metrics)."""
        return self._open[slot].stats

    def close(self, rec: TurnRecord) -> None:
        """`rec`'s END_TURN was folded: hand it to `on_close`."""
        if self._on_close is not None and rec.turn:
            self._on_close(self.records.pop((rec.slot, rec.turn)))


Handler = Callable[[_Turn, Payload, float, float], None]


def _verify(o: _Turn, p: Payload, _t: float, _d: float) -> None:
    k = int(p.get("drafted") or len(p.get("drafts", ())))
    o.stats.drafted += k
    o.rec.verifies += 1
    o.round_k = k


def _commit(o: _Turn, p: Payload, t: float, _d: float) -> None:
    _rolled_back(o)
    accepted = p.get("accepted") or 0
    st = o.stats
    st.rounds += 1
    st.accepted += accepted
    st.decode_s += t - o.round_t
    if o.round_k >= 0:
        o.rec.drafts.append((o.round_k, accepted))
    if o.round_eog is not None and o.answer_end is None:
        o.answer_end = len(o.rec.committed) + o.round_eog + 1
    _committed(o, p)


def _draft(o: _Turn, _p: Payload, _t: float, _d: float) -> None:
    o.round_k = 0


def _reject(o: _Turn, p: Payload, t: float, _d: float) -> None:
    o.round_eog = p.get("eog")
    o.rollback_t = t


def _accept(o: _Turn, p: Payload, _t: float, _d: float) -> None:
    o.round_eog = p.get("eog")


def _restore(o: _Turn, _p: Payload, _t: float, _d: float) -> None:
    o.stats.restores += 1


def _retry(o: _Turn, _p: Payload, _t: float, _d: float) -> None:
    _rolled_back(o)


def _violation(o: _Turn, _p: Payload, _t: float, _d: float) -> None:
    o.stats.violations += 1


def _livelock(o: _Turn, _p: Payload, _t: float, _d: float) -> None:
    o.stats.livelocks += 1


def _start_turn(o: _Turn, p: Payload, _t: float, _d: float) -> None:
    st = o.stats
    st.prompt_tokens = p.get("prompt_tokens", 0)
    st.kept_tokens = p.get("kept", 0)
    st.f_keep = p.get("f_keep", 1.0)


def _prefill(o: _Turn, p: Payload, _t: float, d: float) -> None:
    st = o.stats
    n = p.get("tokens", 0)
    st.prefill_tokens += n
    st.prefill_s += d
    cut = p.get(POSITION)
    if n and cut is not None:  # the re-prefilled history's share of the chunk, by tokens
        pos = cut - n
        if o.prefill_from is None:
            o.prefill_from = pos
        repeated_end = o.prefill_from + st.reprefill_tokens
        st.reprefill_s += d * max(0, min(cut, repeated_end) - pos) / (cut - pos)
    _committed(o, p)


def _ctx_restore(o: _Turn, p: Payload, _t: float, d: float) -> None:
    st = o.stats
    st.ctx_restores += 1
    st.reprefill_tokens += p.get("reprefill", 0)
    st.repair_s += d


def _end_turn(o: _Turn, p: Payload, _t: float, _d: float) -> None:
    o.rec.metrics = p.get("metrics")
    o.close(o.rec)


COUNTERS: dict[str, Handler] = {
    Trigger.VERIFY: _verify, Trigger.COMMIT: _commit, Trigger.DRAFT: _draft,
    Trigger.REJECT: _reject, Trigger.ACCEPT: _accept, Trigger.RESTORE: _restore,
    Trigger.RETRY: _retry, Trigger.INVARIANT_VIOLATION: _violation,
    Trigger.LIVELOCK: _livelock, Trigger.PREFILL: _prefill, Trigger.START_TURN: _start_turn,
    Trigger.CTX_RESTORE: _ctx_restore, Trigger.END_TURN: _end_turn,
}
"""What each trigger does to its turn; a trigger with no entry (BEGIN, NEXT, REPLAY,
DECODE, CTX_SAVE, FAIL) counts nothing."""


def _committed(o: _Turn, p: Payload) -> None:
    """The event's block joins the turn's tokens; the answer and stray tokens are what it
    committed through its first EOG, and what followed."""
    rec, st = o.rec, o.stats
    block = p.get(APPEND)
    if block:
        rec.committed.extend(block)
        rec.marks.append((len(rec.committed), rec.last_seq))
    n = len(rec.committed)
    st.generated_tokens = n if o.answer_end is None else o.answer_end
    st.stray_tokens = n - st.generated_tokens


def _rolled_back(o: _Turn) -> None:
    """A rollback ends where the next verification or the commit begins."""
    if o.rollback_t is not None:
        o.stats.rollback_s += o.t - o.rollback_t
        o.rollback_t = None
