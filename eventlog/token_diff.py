"""Two sessions' committed token streams, compared turn by turn: the first token where
they part.

Different backends (our engine, llama-server) record the same work in different payloads,
so their events cannot be compared field by field; what must agree is the conversation:
each slot's tokens as the projection folds them. A turn's prompt is the slot's sequence
after START_TURN's trim and append; its answer is what the turn's PREFILL and COMMITs
appended, through the EOG (`TurnRecord.answer`). A token id a log does not name (None:
llama-server logs no prompt ids unless the run tokenized them) matches any id and is
counted, never guessed. A log that names no id of a part at all (llama-server without -v:
no prompt, no round) gives that part as unnamed ids: the answer as long as the turn's
END_TURN says it was (`generated_tokens`), the prompt as long as START_TURN says, or,
where it says nothing, as long as the other session's. A turn whose rounds are unknown but
whose answer the engine named (vLLM's stream: END_TURN's `answer_ids`) compares those.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from eventlog.records import TurnKey, TurnRecord
from fsm.event import APPEND, TRIM, Event
from fsm.states import Trigger

Token = int | None

ROUNDS_UNKNOWN = "rounds"
"""The END_TURN metric an imported turn names `unknown` when its log shows no round."""

TOKEN_TRIGGERS = frozenset({Trigger.START_TURN, Trigger.PREFILL, Trigger.COMMIT,
                            Trigger.END_TURN})
"""The only events a token comparison reads (the readers can skip the rest)."""

BEFORE = 8
"""Tokens of the expected sequence kept as context before a divergence."""


class Part(StrEnum):
    """Which part of a turn a token belongs to."""

    PROMPT = "prompt"
    ANSWER = "answer"


@dataclass(frozen=True)
class TokenDivergence:
    """The first token where two sessions part: slot, turn, the `part` of the turn, its
    `index` in that part (in the prompt, which holds the whole conversation so far, that is
    its place in the sequence), its place in each slot's sequence (`position` in the
    expected session, `actual_position` in the other), both ids (None: not named, or past
    the end of that side's part: `lengths` holds both parts' lengths) and the expected
    sequence's tokens just before it."""

    slot: int
    turn: int
    part: Part
    index: int
    position: int
    actual_position: int
    expected: Token
    actual: Token
    lengths: tuple[int, int]
    before: tuple[Token, ...]

    def ended(self, side: int) -> bool:
        """Whether session `side` (0 expected, 1 actual) has no token here: its part ended."""
        return self.index >= self.lengths[side]


@dataclass(frozen=True)
class TurnVerdict:
    """One turn compared: whether the prompts agree (None: an id one side does not name
    kept it from being known) and at which sequence position they first differ, and the
    same for the answers (`answer_diff`: the index in the answer)."""

    same_prompt: bool | None
    prompt_diff: int | None
    same_answer: bool
    answer_diff: int | None


@dataclass(frozen=True)
class TokenDiff:
    """The token comparison of two sessions: the first divergence (None: the streams
    agree), the turns and answer tokens compared, and how many ids each session's log
    does not name."""

    first: TokenDivergence | None
    turns: int
    answer_tokens: int
    unknown: tuple[int, int]


@dataclass(frozen=True)
class TurnTokens:
    """One session's turn as the comparison needs it: START_TURN's cut (None: no cut) and
    appended prompt (None: START_TURN names no prompt; then `prompt_tokens`, the whole
    sequence's length after the start, where it gives one), the answer through the EOG,
    and every token committed after the prompt (stray tokens behind the EOG included:
    they stay in the slot)."""

    trim: int | None
    prompt: Sequence[Token] | None
    answer: Sequence[Token]
    committed: Sequence[Token]
    prompt_tokens: int | None = None


_NO_TURN = TurnTokens(None, (), (), ())


class PromptTap:
    """Keeps each turn's START_TURN cut and prompt until the turn is compared, so that
    only the turns not yet compared are held (fed through `eventlog.turns.folded`)."""

    def __init__(self) -> None:
        self._prompts: dict[TurnKey, tuple[int | None, list[Token] | None, int | None]] = {}

    def apply(self, ev: Event) -> None:
        """Note a START_TURN's cut and prompt."""
        if ev.trigger is Trigger.START_TURN:
            p = ev.payload
            named = APPEND in p or TRIM in p
            self._prompts[(ev.slot, ev.turn)] = (p.get(TRIM), (p.get(APPEND) or [])
                                                 if named else None, p.get("prompt_tokens"))

    def turn(self, key: TurnKey, rec: TurnRecord | None) -> TurnTokens:
        """The turn `key` for comparison (no tokens when this session lacks it)."""
        trim, prompt, n_prompt = self._prompts.pop(key, (None, [], None))
        if rec is None:
            return _NO_TURN
        metrics = rec.metrics or {}
        if ROUNDS_UNKNOWN in metrics.get("unknown", ()):
            # Its log shows the answer's length at most, no id of it; vLLM's stream names
            # the ids even where its steps could not be placed.
            answer: list[Token] = (metrics.get("answer_ids") or
                                   [None] * (metrics.get("generated_tokens") or 0))
            return TurnTokens(trim, prompt, answer, answer, n_prompt)
        return TurnTokens(trim, prompt, rec.answer, rec.committed, n_prompt)


@dataclass(slots=True)
class _Slot:
    """Both sessions' sequences of one slot and the length of their common prefix (ids
    one side does not name match): below it they agree, at it they differ (or one ends)."""

    a: list[Token] = field(default_factory=list)
    b: list[Token] = field(default_factory=list)
    agreed: int = 0


class TokenComparer:
    """Compares two sessions' turns, handed over in each slot's turn order, keeping each
    slot's two sequences as the projection would."""

    def __init__(self) -> None:
        self._slots: dict[int, _Slot] = {}
        self._first: TokenDivergence | None = None
        self._turns = 0
        self._answer_tokens = 0
        self._unknown = [0, 0]

    def compare(self, key: TurnKey, a: TurnTokens, b: TurnTokens) -> TurnVerdict:
        """Fold turn `key` of both sessions and compare it."""
        slot = self._slots.setdefault(key[0], _Slot())
        self._turns += 1
        cut_a, cut_b = _cut(slot.a, a), _cut(slot.b, b)
        # A side whose START_TURN names no prompt takes the other's length, if it must.
        cut_a = _unnamed(slot.a, a, len(slot.b), cut_a)
        cut_b = _unnamed(slot.b, b, len(slot.a), cut_b)
        for side, t in enumerate((a, b)):
            prompt = t.prompt if t.prompt is not None else (slot.a, slot.b)[side]
            self._unknown[side] += prompt.count(None) + t.committed.count(None)
        if slot.agreed >= min(cut_a, cut_b):  # else the difference at `agreed` stays
            slot.agreed = _common(slot.a, slot.b, min(cut_a, cut_b))
        la, lb = len(slot.a), len(slot.b)
        prompt_diff = None if slot.agreed == la == lb else slot.agreed
        if prompt_diff is not None:
            self._note(key, Part.PROMPT, prompt_diff, slot, (slot.a, slot.b))
        unnamed = any(t.prompt is None or None in t.prompt for t in (a, b))
        same_prompt = False if prompt_diff is not None else (None if unnamed else True)
        answer_diff = _first_difference(a.answer, b.answer)
        self._answer_tokens += min(len(a.answer), len(b.answer))
        slot.a.extend(a.committed)
        slot.b.extend(b.committed)
        if slot.agreed >= min(la, lb):
            slot.agreed = _common(slot.a, slot.b, slot.agreed)
        if answer_diff is not None:
            self._note(key, Part.ANSWER, answer_diff, slot, (a.answer, b.answer), (la, lb))
        return TurnVerdict(same_prompt, prompt_diff, answer_diff is None, answer_diff)

    def result(self) -> TokenDiff:
        """What the comparison found so far."""
        return TokenDiff(self._first, self._turns, self._answer_tokens,
                         (self._unknown[0], self._unknown[1]))

    def _note(self, key: TurnKey, part: Part, index: int, slot: _Slot,
              parts: tuple[Sequence[Token], Sequence[Token]],
              starts: tuple[int, int] = (0, 0)) -> None:
        """Keep the divergence at `index` of both sessions' `parts` (at sequence positions
        `starts` in their slots) if it is the earliest (by slot, turn, prompt before
        answer)."""
        first = self._first
        if first is not None and (first.slot, first.turn) <= key:
            return
        (x, y), pa = parts, starts[0] + index
        self._first = TokenDivergence(key[0], key[1], part, index, pa, starts[1] + index,
                                      _at(x, index), _at(y, index), (len(x), len(y)),
                                      tuple(slot.a[max(0, pa - BEFORE):pa]))


def _cut(seq: list[Token], t: TurnTokens) -> int:
    """Apply a turn's START_TURN to `seq` (trim, then append) and return the length kept
    (a START_TURN that names no prompt is applied by `_unnamed`)."""
    if t.prompt is None:
        return len(seq)
    if t.trim is not None:
        del seq[t.trim:]
    kept = len(seq)
    seq.extend(t.prompt)
    return kept


def _unnamed(seq: list[Token], t: TurnTokens, other: int, kept: int) -> int:
    """A START_TURN that names no prompt: the whole sequence is unnamed ids, as long as
    its `prompt_tokens` or else the other side's sequence (`other`); nothing of it is
    known to be kept. Any other START_TURN: `kept` unchanged."""
    if t.prompt is not None:
        return kept
    seq[:] = [None] * (t.prompt_tokens if t.prompt_tokens is not None else other)
    return 0


def _common(x: Sequence[Token], y: Sequence[Token], start: int) -> int:
    """The first index from `start` where `x` and `y` differ (both named), or where the
    shorter one ends."""
    end = min(len(x), len(y))
    for i in range(start, end):
        u, v = x[i], y[i]
        if u != v and u is not None and v is not None:
            return i
    return end


def _first_difference(x: Sequence[Token], y: Sequence[Token]) -> int | None:
    """Where two answers first differ, None when they agree (lengths included)."""
    i = _common(x, y, 0)
    return None if i == len(x) == len(y) else i


def _at(seq: Sequence[Token], i: int) -> Token:
    return seq[i] if i < len(seq) else None
