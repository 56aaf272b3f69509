"""Divergence between event streams, and the per-turn comparison of two sessions."""

from collections.abc import Iterator
from dataclasses import replace

from eventlog.diff import END_OF_LOG, Follower, diff_streams
from eventlog.turns import fold_turns
from fsm.event import Event
from fsm.states import Trigger
from tests.eventlog.sim import sim_events


def test_a_stream_against_itself_has_no_divergence() -> None:
    events, _ = sim_events()
    result = diff_streams(events, list(events))
    assert result.divergence is None and result.compared == len(events)
    assert [(t.slot, t.turn, t.same_output) for t in result.turns] == [(0, 1, True),
                                                                       (0, 2, True)]
    assert all(a == b for t in result.turns for a, b in t.metrics.values())


def test_first_divergence_names_place_field_and_the_events_before() -> None:
    events, _ = sim_events()
    i = next(i for i, e in enumerate(events) if e.trigger is Trigger.COMMIT and i > 20)
    bad = list(events)
    bad[i] = replace(events[i], payload={**events[i].payload, "digest": "0" * 16})
    d = diff_streams(events, bad).divergence
    assert (d.seq, d.slot, d.turn, d.round) == (events[i].seq, 0, events[i].turn,
                                                events[i].round)
    assert (d.field, d.expected, d.actual) == ("payload.digest", events[i].payload["digest"],
                                               "0" * 16)
    assert [e.seq for e in d.before] == [e.seq for e in events[i - 5:i]]
    assert d.expected_event == events[i] and d.actual_event == bad[i]


def test_a_shorter_or_longer_stream_diverges_at_the_end() -> None:
    events, _ = sim_events()
    d = diff_streams(events, events[:-3]).divergence
    assert (d.seq, d.field, d.expected, d.actual) == (events[-3].seq, "event",
                                                      events[-3].trigger.value, END_OF_LOG)
    d = diff_streams(events[:-3], events).divergence
    assert (d.seq, d.field, d.expected) == (events[-3].seq, "event", END_OF_LOG)


def test_follower_stops_comparing_after_the_first_divergence() -> None:
    events, _ = sim_events()
    follower = Follower(events)
    assert follower.check(events[0]) is None
    first = follower.check(events[0])  # a repeated event: seq differs
    assert first is not None and first.field == "seq"
    assert follower.check(events[5]) is None and follower.finish() is first
    assert follower.compared == 2


def test_counterfactual_turns_show_output_and_metric_deltas() -> None:
    legacy, _ = sim_events(eog_policy="legacy", answer_tokens=40)
    truncate, _ = sim_events(eog_policy="truncate", answer_tokens=40)
    result = diff_streams(legacy, truncate)
    assert result.divergence is not None
    assert all(t.same_output for t in result.turns)
    stray = {t.turn: t.metrics["stray_tokens"] for t in result.turns}
    assert stray[1][0] > 0 and stray[1][1] == 0


def test_turn_answers_stop_at_the_generated_count_and_know_their_seqs() -> None:
    events, _ = sim_events(eog_policy="legacy", answer_tokens=40)
    turns = fold_turns(events)
    rec = turns[(0, 1)]
    assert len(rec.answer) == rec.metrics["generated_tokens"] == 41
    assert len(rec.committed) > len(rec.answer)  # the stray tokens behind EOG
    commit = next(e for e in events if e.trigger is Trigger.COMMIT and e.turn == 1)
    assert rec.seq_of(0) < commit.seq == rec.seq_of(1)


def test_after_the_divergence_both_streams_are_read_turn_by_turn() -> None:
    """Constant memory: no stream's closed turns pile up waiting for the other's."""
    legacy, _ = sim_events(eog_policy="legacy", turns=6, answer_tokens=40)
    truncate, _ = sim_events(eog_policy="truncate", turns=6, answer_tokens=40)
    reached = {"a": 0}

    def a_stream() -> Iterator[Event]:
        for ev in legacy:
            reached["a"] = ev.turn
            yield ev

    def b_stream() -> Iterator[Event]:
        for ev in truncate:
            if ev.trigger is Trigger.START_TURN:
                assert reached["a"] >= ev.turn - 1, "a fell behind b"
            yield ev

    result = diff_streams(a_stream(), b_stream())
    assert result.divergence is not None and result.divergence.turn == 1
    whole = diff_streams(legacy, truncate)  # lists: nothing to keep pace with
    assert result.turns == whole.turns and len(result.turns) == 6
    assert all(t.same_output for t in result.turns)
