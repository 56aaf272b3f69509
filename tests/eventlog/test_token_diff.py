"""Token-level diff: two sessions' committed token streams compared turn by turn, the first
differing token named by slot, turn, part, index, sequence positions and ids."""

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

from eventlog.diff import DiffMode, diff_mode, diff_streams
from eventlog.reader import SessionInfo
from eventlog.schema import SessionStatus
from eventlog.token_diff import Part
from fsm.event import Event
from fsm.states import Trigger
from tests.eventlog.sim import sim_events

TOKENS = DiffMode.TOKENS


def _with_payload(ev: Event, **changes: object) -> Event:
    return replace(ev, payload={**ev.payload, **changes})


def _start(events: list[Event], turn: int) -> int:
    return next(i for i, e in enumerate(events)
                if e.trigger is Trigger.START_TURN and e.turn == turn)


def _commit(events: list[Event], turn: int, nth: int = 0) -> int:
    """The `nth` commit of `turn` that commits two tokens or more."""
    return [i for i, e in enumerate(events) if e.trigger is Trigger.COMMIT
            and e.turn == turn and len(e.payload["append"]) > 1][nth]


def _answer_offset(events: list[Event], turn: int, index: int) -> int:
    """Tokens of turn `turn`'s answer before commit `index` (the prefill's first one too)."""
    return sum(len(e.payload.get("append", ())) for e in events[_start(events, turn) + 1:index]
               if e.trigger in (Trigger.PREFILL, Trigger.COMMIT))


def test_a_stream_against_itself_agrees_token_for_token() -> None:
    events, _ = sim_events()
    result = diff_streams(events, list(events), mode=TOKENS)
    assert result.identical and result.mode is TOKENS and result.divergence is None
    assert result.tokens is not None and result.tokens.first is None
    assert result.tokens.turns == 2 and result.tokens.unknown == (0, 0)
    assert result.tokens.answer_tokens == sum(t.metrics["generated_tokens"][0]
                                              for t in result.turns)
    assert [(t.turn, t.same_prompt, t.same_output) for t in result.turns] == [
        (1, True, True), (2, True, True)]


def test_a_changed_answer_token_is_named_with_both_positions() -> None:
    events, _ = sim_events()
    i = _commit(events, 2, 3)
    bad = list(events)
    block = list(events[i].payload["append"])
    expected = block[1]
    block[1] = expected + 1
    bad[i] = _with_payload(events[i], append=block)
    result = diff_streams(events, bad, mode=TOKENS)
    assert not result.identical
    d = result.tokens.first if result.tokens is not None else None
    assert d is not None
    index = _answer_offset(events, 2, i) + 1
    prompt = events[_start(events, 2)].payload["prompt_tokens"]
    assert (d.slot, d.turn, d.part, d.index) == (0, 2, Part.ANSWER, index)
    assert (d.position, d.actual_position) == (prompt + index, prompt + index)
    assert (d.expected, d.actual) == (expected, expected + 1)
    assert len(d.before) == 8 and not d.ended(0) and not d.ended(1)
    turn2 = result.turns[1]
    assert (turn2.same_prompt, turn2.same_output, turn2.first_token_diff) == (
        True, False, index)


def test_a_changed_prompt_token_comes_before_the_answer() -> None:
    events, _ = sim_events()
    i = _start(events, 1)
    prompt = list(events[i].payload["append"])
    prompt[5] += 1
    bad = list(events)
    bad[i] = _with_payload(events[i], append=prompt)
    d = diff_streams(events, bad, mode=TOKENS).tokens.first  # type: ignore[union-attr]
    assert d is not None and (d.turn, d.part, d.index, d.position) == (1, Part.PROMPT, 5, 5)
    assert d.actual == d.expected + 1  # type: ignore[operator]


def test_a_slot_that_keeps_one_token_less_and_sends_it_again_agrees() -> None:
    """llama-server drops the last kept token at release and re-sends it with the prompt:
    a different trim and append, the same sequence."""
    events, _ = sim_events()
    i = _start(events, 2)
    p = events[i].payload
    sequence: list[int] = []
    for e in events[:i]:
        if "trim" in e.payload:
            del sequence[e.payload["trim"]:]
        sequence.extend(e.payload.get("append", ()))
    llama = list(events)
    llama[i] = _with_payload(events[i], trim=p["trim"] - 1,
                             append=[sequence[p["trim"] - 1], *p["append"]])
    result = diff_streams(events, llama, mode=TOKENS)
    assert result.identical and all(t.same_prompt for t in result.turns)


def test_ids_a_log_does_not_name_match_and_are_counted() -> None:
    events, _ = sim_events()
    imported = [_with_payload(e, append=[None] * len(e.payload["append"]))
                if e.trigger is Trigger.START_TURN else e for e in events]
    result = diff_streams(imported, events, mode=TOKENS)
    assert result.identical and result.tokens is not None
    unknown = sum(len(e.payload["append"]) for e in events if e.trigger is Trigger.START_TURN)
    assert result.tokens.unknown == (unknown, 0)
    assert [(t.same_prompt, t.same_output) for t in result.turns] == [(None, True)] * 2


def test_a_shorter_answer_differs_at_its_eog() -> None:
    long, _ = sim_events(answer_tokens=60)
    short, _ = sim_events(answer_tokens=30)
    d = diff_streams(long, short, mode=TOKENS).tokens.first  # type: ignore[union-attr]
    assert d is not None and (d.turn, d.part, d.index, d.lengths) == (1, Part.ANSWER, 30,
                                                                      (61, 31))
    eog = [e for e in short if e.trigger is Trigger.COMMIT and e.turn == 1][-1]
    assert d.actual == eog.payload["append"][-1] != d.expected


def test_an_answer_cut_short_ends_where_the_other_goes_on() -> None:
    events, _ = sim_events()
    i = next(i for i, e in enumerate(events) if e.trigger is Trigger.END_TURN)
    metrics = events[i].payload["metrics"]
    cut = list(events)
    cut[i] = _with_payload(events[i], metrics={**metrics, "generated_tokens": 20})
    d = diff_streams(events, cut, mode=TOKENS).tokens.first  # type: ignore[union-attr]
    assert d is not None and (d.turn, d.part, d.index) == (1, Part.ANSWER, 20)
    assert d.ended(1) and not d.ended(0) and d.actual is None
    assert d.lengths == (metrics["generated_tokens"], 20)


def test_a_turn_only_one_session_has_is_a_difference() -> None:
    events, _ = sim_events()
    one_turn = events[:_start(events, 2)]
    result = diff_streams(events, one_turn, mode=TOKENS)
    assert not result.identical and result.tokens is not None
    d = result.tokens.first
    assert d is not None and d.turn == 2 and d.ended(1)
    assert [t.same_output for t in result.turns] == [True, None]


def test_b_is_read_in_step_with_a() -> None:
    """Flat memory: `a` is read on only as far as `b` has closed turns."""
    a_events, _ = sim_events(turns=6)
    reached = {"a": 0}

    def a_stream() -> Iterator[Event]:
        for ev in a_events:
            reached["a"] = ev.turn
            yield ev

    def b_stream() -> Iterator[Event]:
        for ev in a_events:
            if ev.trigger is Trigger.START_TURN:
                assert ev.turn - 1 <= reached["a"] <= ev.turn, "a out of step with b"
            yield ev

    assert diff_streams(a_stream(), b_stream(), mode=TOKENS).identical


def _info(backend: str) -> SessionInfo:
    now = datetime.now(UTC)
    return SessionInfo(1, now, SessionStatus.FINISHED, 0, backend, {}, {}, "", None, None, 0,
                       "", now)


def test_sessions_of_different_backends_compare_tokens() -> None:
    assert diff_mode(_info("llama"), _info("torch")) is TOKENS
    assert diff_mode(_info("torch"), _info("torch")) is DiffMode.EVENTS
    assert diff_mode(_info("torch"), _info("torch"), tokens=True) is TOKENS


def _imported(name: str) -> list[Event]:
    """A captured llama-server log (tests/adapters/llama/fixtures) imported into memory."""
    from adapters.llama.ledger.record import record_log
    from adapters.llama.log.sources import read_log
    from engine.session import MemoryJournal
    from tests.adapters.llama.log.test_reader import FIXTURES

    journal = MemoryJournal()
    record_log(read_log(FIXTURES / f"{name}.log.gz"), journal)
    return journal.events


def test_a_log_without_v_agrees_with_the_same_run_logged_with_it() -> None:
    # Both fixtures ran the same greedy conversation (fixtures/README.md): one logged with
    # -v (every id of the answers), one without (lengths only, no id, no prompt).
    verbose, quiet = _imported("mtp"), _imported("quiet")
    for a, b in ((verbose, quiet), (quiet, verbose)):
        result = diff_streams(a, b, mode=TOKENS)
        assert result.identical and result.tokens is not None
        assert result.tokens.first is None and result.tokens.answer_tokens == 48
        assert [(t.same_prompt, t.same_output) for t in result.turns] == [(None, True)] * 2
    # An answer of another length still differs, where the shorter one ends.
    i = next(i for i, e in enumerate(quiet) if e.trigger is Trigger.END_TURN)
    metrics = quiet[i].payload["metrics"]
    shorter = list(quiet)
    shorter[i] = _with_payload(quiet[i], metrics={**metrics, "generated_tokens": 20})
    d = diff_streams(verbose, shorter, mode=TOKENS).tokens.first  # type: ignore[union-attr]
    assert d is not None and (d.turn, d.part, d.index, d.lengths) == (1, Part.ANSWER, 20,
                                                                      (24, 20))
