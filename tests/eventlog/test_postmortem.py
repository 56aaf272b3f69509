"""Postmortem detectors on sim sessions: each planted bug is found with its numbers, and
the fixed configurations are clean."""

from collections.abc import Iterator
from dataclasses import replace

import pytest

from eventlog.postmortem import Finding, Kind, Severity, analyze
from eventlog.postmortem.acceptance import AcceptanceCollapse
from eventlog.turns import fold_turns
from fsm.event import Event
from fsm.payload_schema import check_events
from fsm.states import RoundState, Trigger
from tests.eventlog.sim import sim_events

S = RoundState


def _kinds(events: list[Event], config: dict, **kw: object) -> dict[Kind, object]:
    findings, n = analyze(events, config, **kw)
    assert n == len(events)
    return {f.kind: f for f in findings}


@pytest.mark.parametrize("strategy", ["checkpoint", "per_token", "input_replay"])
def test_fixed_configurations_are_clean(strategy: str) -> None:
    events, config = sim_events(strategy=strategy, acceptance=0.8)
    plain, _ = sim_events(drafter="none")
    assert _kinds(events, config, reference=plain, reference_id=1) == {}


def test_eog_stray_tokens_and_the_reprefill_they_cause() -> None:
    events, config = sim_events(eog_policy="legacy", acceptance=0.9, turns=3)
    f = _kinds(events, config)[Kind.EOG_STRAY_TOKENS]
    metrics = [e.payload["metrics"] for e in events if e.trigger is Trigger.END_TURN]
    assert f.severity is Severity.ERROR
    assert f.numbers["stray_tokens"] == sum(m["stray_tokens"] for m in metrics) > 0
    assert f.numbers["reprefill_tokens"] == sum(m["reprefill_tokens"] for m in metrics) > 0
    row = next(r for r in f.numbers["per_turn"] if r["reprefill"])
    assert row["reprefill"] == row["answer"] - 1 + 4  # #28049: answer + 4
    first = next(e for e in events if e.seq == f.first_seq)
    assert first.trigger is Trigger.COMMIT and first.turn == f.turn
    assert "--eog-policy truncate" in f.fix and "answer + 4" in f.explanation


def test_replay_livelock_names_the_cycle() -> None:
    events, config = sim_events(replay_policy="reverify", tie_flip_rate=0.3)
    found = _kinds(events, config)
    f = found[Kind.REPLAY_LIVELOCK]
    guards = [e for e in events if e.trigger is Trigger.LIVELOCK]
    assert f.severity is Severity.ERROR and f.numbers["rounds"] == len(guards) > 0
    assert f.numbers["cycle"] == "verify -> reject -> restore -> replay -> restore -> retry " \
                                 "-> verify"
    assert f.first_seq < guards[0].seq and f.round == guards[0].round
    assert Kind.RESTORE_STORM not in found


def test_repeated_restores_without_the_guard_are_a_storm_or_a_livelock() -> None:
    events, config = sim_events(replay_policy="reverify", tie_flip_rate=0.3)
    unguarded = [e for e in events if e.trigger is not Trigger.LIVELOCK]
    found = _kinds(unguarded, config)
    assert found[Kind.RESTORE_STORM].severity is Severity.WARNING
    assert found[Kind.RESTORE_STORM].numbers["cycle"].startswith("verify -> reject")
    # a log that ends inside such a round never made progress: a livelock
    last = max(i for i, e in enumerate(unguarded) if e.trigger is Trigger.RESTORE
               and e.payload.get("mode") == "reverify_mismatch")
    assert Kind.REPLAY_LIVELOCK in _kinds(unguarded[: last + 1], config)


@pytest.mark.parametrize("audit", [True, False])
def test_state_contamination_names_the_round_where_it_began(audit: bool) -> None:
    events, config = sim_events(strategy="none", audit=audit)
    f = _kinds(events, config)[Kind.STATE_CONTAMINATION]
    first = next(e for e in events if e.trigger is Trigger.COMMIT and e.source is S.REJECT)
    assert (f.severity, f.first_seq, f.turn, f.round) == (Severity.ERROR, first.seq,
                                                          first.turn, first.round)
    assert f.numbers["no_rollback_rounds"] > 0
    assert (f.numbers["state_truth_violations"] > 0) is audit
    assert ("inferred" in f.explanation) is not audit


def test_output_against_a_plain_reference() -> None:
    plain, _ = sim_events(drafter="none")
    events, config = sim_events(strategy="none")
    f = _kinds(events, config, reference=plain, reference_id=7)[
        Kind.OUTPUT_MISMATCH]
    first = f.numbers["first"]
    assert f.severity is Severity.ERROR and f.numbers["reference"] == 7
    assert f.numbers["invariant"] == "lossless" and "lossless failed" in f.explanation
    want = fold_turns(plain)[(0, first["turn"])].answer
    assert want[first["token_index"]] == first["expected"] != first["actual"]
    sampled = {**config, "temperature": 0.7}
    info = _kinds(events, sampled, reference=plain, reference_id=7)
    assert info[Kind.OUTPUT_MISMATCH].severity is Severity.INFO
    assert "invariant" not in info[Kind.OUTPUT_MISMATCH].numbers  # undecidable from a log


def test_acceptance_collapse_streaks() -> None:
    events, config = sim_events(acceptance=0.05, answer_tokens=80)
    f = _kinds(events, config)[Kind.ACCEPTANCE_COLLAPSE]
    assert f.severity is Severity.WARNING and f.numbers["longest"] >= 8
    assert f.numbers["drafted_wasted"] >= config["draft_max"] * f.numbers["longest"]
    events, config = sim_events(acceptance=0.95)
    assert Kind.ACCEPTANCE_COLLAPSE not in _kinds(events, config)


def _fed(detector: AcceptanceCollapse, events: list[Event]) -> list[Finding]:
    """`detector`'s findings over `events`, fed as the postmortem's one pass feeds it."""
    handlers = detector.handlers()
    for ev in events:
        handler = handlers.get(ev.trigger)
        if handler is not None:
            handler((ev.seq, ev.slot, ev.turn, ev.round, ev.trigger, ev.duration, ev.source,
                     ev.t, ev.payload), ev.payload)
    return detector.finish()


def _longest_streak(events: list[Event]) -> int:
    """The longest run of speculative rounds of one slot accepting no draft, counted
    naively (a round without drafts neither extends nor ends it; a turn's end does)."""
    longest, run, drafted = 0, {}, {}
    for ev in events:
        if ev.trigger is Trigger.VERIFY:
            drafted[ev.slot] = ev.payload["drafted"]
        elif ev.trigger is Trigger.COMMIT and drafted.pop(ev.slot, 0):
            run[ev.slot] = 0 if ev.payload["accepted"] else run.get(ev.slot, 0) + 1
            longest = max(longest, run[ev.slot])
        elif ev.trigger is Trigger.END_TURN:
            run[ev.slot] = 0
    return longest


def test_a_streak_of_exactly_the_minimum_is_reported() -> None:
    events, config = sim_events(acceptance=0.3, answer_tokens=80, turns=3)
    longest = _longest_streak(events)
    assert longest >= 2
    found = _fed(AcceptanceCollapse(config, min_streak=longest), events)
    assert [f.numbers["longest"] for f in found] == [longest]
    assert _fed(AcceptanceCollapse(config, min_streak=longest + 1), events) == []


def _draft_stream(recomputed: list[int]) -> list[Event]:
    """Turns of two drafts each; `recomputed` is the drafter's running total per draft."""
    out, seq = [], 0
    for i, total in enumerate(recomputed):
        turn = i // 2 + 1
        if i % 2 == 0:
            seq += 1
            out.append(Event(seq, 0, turn, 0, Trigger.START_TURN, S.IDLE, S.IDLE, 0.0, 0.0,
                             {"prompt_tokens": 10, "kept": 0, "f_keep": 1.0}))
        seq += 1
        out.append(Event(seq, 0, turn, 1 + i % 2, Trigger.DRAFT, S.CHECKPOINT, S.SPECULATE,
                         0.0, 0.25, {"drafts": [1], "drafter": "draft-model",
                                     "draft_recomputed": total, "draft_position": 10}))
    assert check_events(out) == []
    return out


def test_draft_checkpoints_discarded_between_requests() -> None:
    config = {"draft_checkpoints": "discard"}
    f = _kinds(_draft_stream([0, 0, 120, 120, 300, 300]), config)[
        Kind.DRAFT_CHECKPOINT_DISCARD]
    assert f.numbers["recomputed_tokens"] == 300 and f.numbers["requests_affected"] == 2
    assert f.numbers["requests"] == 2  # the later requests: the first has nothing to keep
    assert (f.turn, f.severity) == (2, Severity.WARNING) and f.numbers["draft_s"] == 0.5
    assert _kinds(_draft_stream([0, 0, 0, 3, 3, 3]), config) == {}
    # The first request builds the draft state once: no checkpoint could have kept it.
    assert _kinds(_draft_stream([50, 50, 50, 50]), config) == {}


def test_other_violations_and_failures() -> None:
    events, config = sim_events()
    last = events[-1]
    extra = [
        replace(last, seq=last.seq + 1, trigger=Trigger.INVARIANT_VIOLATION,
                payload={"invariant": "bookkeeping", "message": "kv 3 != 4",
                         "details": {"kv_len": 3}}),
        replace(last, seq=last.seq + 2, trigger=Trigger.FAIL, dest=S.FAILED,
                payload={"error": "BackendError: out of memory"}),
    ]
    found = _kinds(events + extra, config)
    assert found[Kind.INVARIANT_VIOLATION].numbers["invariant"] == "bookkeeping"
    assert "out of memory" in found[Kind.RUN_FAILED].explanation
    assert {f.severity for f in found.values()} == {Severity.ERROR}


def test_the_reference_is_read_in_step_with_the_session() -> None:
    """Constant memory: neither session's closed turns pile up waiting for the other's."""
    plain, _ = sim_events(drafter="none", turns=5)
    events, config = sim_events(strategy="none", turns=5)
    reached = {"reference": 0}

    def reference() -> Iterator[Event]:
        for ev in plain:
            reached["reference"] = ev.turn
            yield ev

    class Session(list[Event]):
        def __iter__(self) -> Iterator[Event]:
            for ev in super().__iter__():
                if ev.trigger is Trigger.START_TURN:
                    assert reached["reference"] >= ev.turn - 1, "the reference fell behind"
                yield ev

    streamed, _ = analyze(Session(events), config, reference=reference(), reference_id=7)
    whole, _ = analyze(events, config, reference=plain, reference_id=7)
    mismatch = next(f for f in streamed if f.kind is Kind.OUTPUT_MISMATCH)
    assert mismatch == next(f for f in whole if f.kind is Kind.OUTPUT_MISMATCH)
    assert mismatch.numbers["turns_compared"] == 5


def test_a_storms_redo_time_is_the_time_its_rounds_spent_after_their_first_repeat() -> None:
    events, config = sim_events(replay_policy="reverify", tie_flip_rate=0.3)
    f = _kinds(events, config)[Kind.REPLAY_LIVELOCK]
    rounds: dict[tuple[int, int, int], list[Event]] = {}
    for ev in events:
        rounds.setdefault((ev.slot, ev.turn, ev.round), []).append(ev)
    expected = 0.0
    for evs in rounds.values():
        seen: set[int] = set()
        for i, ev in enumerate(evs):
            if ev.trigger is Trigger.RESTORE:
                if ev.payload["position"] in seen:  # the first repeat: the rest is redo
                    expected += sum(e.duration for e in evs[i:] if e.trigger is not Trigger.NEXT)
                    break
                seen.add(ev.payload["position"])
    assert expected > 0
    assert f.numbers["redo_s"] == pytest.approx(expected, abs=1e-5)
