"""Where two event streams part, and what each turn did differently.

Re-execution follows the recorded stream with a `Follower` while the engine runs, so it can
stop at the first divergence; `diff_streams` compares two stored sessions the same way
(Temporal's NondeterminismError, for speculative rounds) and also lines their turns up.
Sessions of different backends record the same work in different payloads: those are
compared token by token instead (`DiffMode.TOKENS`, eventlog/token_diff.py).
"""

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eventlog.compare import EXACT, Tolerance, compare_events
from eventlog.fold import LogFold, TurnRecord
from eventlog.reader import SessionInfo
from eventlog.token_diff import PromptTap, TokenComparer, TokenDiff, TurnVerdict
from eventlog.turns import TurnPairs, folded
from fsm.event import Event

END_OF_LOG = "<end of log>"
"""`expected`/`actual` value when one stream ended before the other."""


@dataclass(frozen=True)
class Divergence:
    """The first event where two streams differ: its place (seq, slot, turn, round, taken
    from whichever event exists, the expected one first), the first differing `field`,
    both values, both events, and the agreed events just before it."""

    seq: int
    slot: int
    turn: int
    round: int
    field: str
    expected: Any
    actual: Any
    expected_event: Event | None
    actual_event: Event | None
    before: tuple[Event, ...]


class Follower:
    """Compares actual events, handed over one at a time, with an expected stream. After
    the first divergence it stops comparing: everything later follows from it."""

    def __init__(self, expected: Iterable[Event], tol: Tolerance = EXACT,
                 context: int = 5) -> None:
        self._expected = iter(expected)
        self._tol = tol
        self._before: deque[Event] = deque(maxlen=context)
        self.compared = 0
        self.divergence: Divergence | None = None

    def check(self, actual: Event) -> Divergence | None:
        """Compare the next actual event; the divergence if this is where it happens."""
        if self.divergence is not None:
            return None
        expected = next(self._expected, None)
        if expected is None:
            return self._diverge("event", END_OF_LOG, actual.trigger.value, None, actual)
        self.compared += 1
        found = compare_events(expected, actual, self._tol)
        if found is None:
            self._before.append(expected)
            return None
        return self._diverge(found.field, found.expected, found.actual, expected, actual)

    def finish(self) -> Divergence | None:
        """The actual stream ended: a divergence if the expected one goes on."""
        if self.divergence is not None:
            return self.divergence
        expected = next(self._expected, None)
        if expected is not None:
            self._diverge("event", expected.trigger.value, END_OF_LOG, expected, None)
        return self.divergence

    def close(self) -> None:
        """Release the expected stream (a database cursor) before it is exhausted."""
        close = getattr(self._expected, "close", None)
        if close is not None:
            close()

    def remaining(self) -> Iterator[Event]:
        """The expected events not compared (all that follow a divergence)."""
        return self._expected

    def _diverge(self, field: str, exp: Any, act: Any, e: Event | None,
                 a: Event | None) -> Divergence:
        where = e if e is not None else a
        assert where is not None
        self.divergence = Divergence(where.seq, where.slot, where.turn, where.round, field,
                                     exp, act, e, a, tuple(self._before))
        return self.divergence


class DiffMode(StrEnum):
    """What two sessions must agree on: every event, or the committed tokens."""

    EVENTS = "events"
    TOKENS = "tokens"


def diff_mode(a: SessionInfo, b: SessionInfo, tokens: bool = False) -> DiffMode:
    """Tokens when asked, or when the sessions come from different backends (their events
    record the same rounds in different payloads); events otherwise."""
    return DiffMode.TOKENS if tokens or a.backend != b.backend else DiffMode.EVENTS


@dataclass(frozen=True)
class TurnDelta:
    """One (slot, turn) of two sessions: whether the visible answers agree (None when only
    one session has the turn), where they first differ, and each numeric metric as (a, b).
    A token comparison also says whether the prompts agree (None: not compared, or an id
    a log does not name) and at which sequence position they first differ."""

    slot: int
    turn: int
    same_output: bool | None
    first_token_diff: int | None
    metrics: dict[str, tuple[float | None, float | None]]
    same_prompt: bool | None = None
    first_prompt_diff: int | None = None


@dataclass(frozen=True)
class StreamDiff:
    """Two streams compared: the first divergence (None: identical, timings aside), the
    events compared before it, and the per-turn comparison; in `DiffMode.TOKENS`, no
    events are compared and `tokens` holds the token comparison."""

    divergence: Divergence | None
    compared: int
    turns: list[TurnDelta]
    mode: DiffMode = DiffMode.EVENTS
    tokens: TokenDiff | None = None

    @property
    def identical(self) -> bool:
        """Whether the streams agree in the compared sense."""
        if self.tokens is not None:
            return self.tokens.first is None
        return self.divergence is None


def diff_streams(a: Iterable[Event], b: Iterable[Event], tol: Tolerance = EXACT,
                 context: int = 5, mode: DiffMode = DiffMode.EVENTS) -> StreamDiff:
    """Compare `b` against `a` event by event (or, in `DiffMode.TOKENS`, token by token:
    `diff_tokens`), reading each stream once.

    Memory stays flat: each turn is compared as soon as both streams have closed it, and
    after the first divergence (when comparing events stops) `a` keeps pace with `b` turn
    by turn, so neither side's closed turns pile up waiting for the other's.
    """
    if mode is DiffMode.TOKENS:
        return diff_tokens(a, b)
    deltas: list[TurnDelta] = []
    pairs = TurnPairs(lambda key, ra, rb: deltas.append(turn_delta(key, ra, rb)))
    fa, fb = LogFold(pairs.closer(0)), LogFold(pairs.closer(1))
    follower = Follower(folded(a, fa), tol, context)
    rest = follower.remaining()
    for ev in folded(b, fb):
        if follower.divergence is None:
            follower.check(ev)
        if follower.divergence is not None:
            pairs.catch_up(0, rest)
    if follower.divergence is None:
        follower.finish()
    deque(rest, maxlen=0)  # drained through the tap, for the rest of `a`'s turns
    pairs.finish(fa.records, fb.records)
    return StreamDiff(follower.divergence, follower.compared,
                      sorted(deltas, key=lambda d: (d.slot, d.turn)))


def diff_tokens(a: Iterable[Event], b: Iterable[Event]) -> StreamDiff:
    """Compare the committed token streams of `b` and `a` turn by turn, reading each
    stream once and `a` in step with `b` (memory: each slot's two sequences and the turns
    one side has closed and the other not yet)."""
    deltas: list[TurnDelta] = []
    comparer = TokenComparer()
    taps = (PromptTap(), PromptTap())

    def pair(key: tuple[int, int], ra: TurnRecord | None, rb: TurnRecord | None) -> None:
        verdict = comparer.compare(key, taps[0].turn(key, ra), taps[1].turn(key, rb))
        deltas.append(turn_delta(key, ra, rb, verdict))

    pairs = TurnPairs(pair)
    fa, fb = LogFold(pairs.closer(0)), LogFold(pairs.closer(1))
    rest = folded(folded(a, taps[0]), fa)
    for _ in folded(folded(b, taps[1]), fb):
        pairs.catch_up(0, rest)
    deque(rest, maxlen=0)
    pairs.finish(fa.records, fb.records)
    return StreamDiff(None, 0, sorted(deltas, key=lambda d: (d.slot, d.turn)),
                      DiffMode.TOKENS, comparer.result())


def turn_delta(key: tuple[int, int], ra: TurnRecord | None, rb: TurnRecord | None,
               verdict: TurnVerdict | None = None) -> TurnDelta:
    """One (slot, turn) of two sessions; either side may lack it. With a token
    comparison's `verdict`, its answer comparison (ids a log does not name match any) and
    its prompt comparison."""
    ma = ra.metrics if ra is not None and ra.metrics else {}
    mb = rb.metrics if rb is not None and rb.metrics else {}
    names = [k for k in {**ma, **mb} if _numeric(ma.get(k)) or _numeric(mb.get(k))]
    metrics = {k: (ma.get(k), mb.get(k)) for k in names if k not in ("slot", "turn")}
    if ra is None or rb is None:
        return TurnDelta(key[0], key[1], None, None, metrics)
    if verdict is not None:
        return TurnDelta(key[0], key[1], verdict.same_answer, verdict.answer_diff, metrics,
                         verdict.same_prompt, verdict.prompt_diff)
    xa, xb = ra.answer, rb.answer
    first = next((i for i, (x, y) in enumerate(zip(xa, xb, strict=False)) if x != y),
                 None if len(xa) == len(xb) else min(len(xa), len(xb)))
    return TurnDelta(key[0], key[1], first is None, first, metrics)


def _numeric(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)
