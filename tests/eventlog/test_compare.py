"""Event comparison: timings never count, digests count unless skipped, floats within the
stated tolerance, and the first differing field is named by its path."""

from dataclasses import replace

from eventlog.compare import Tolerance, compare_events
from fsm.event import Event
from fsm.states import RoundState, Trigger


def _ev(trigger: Trigger = Trigger.COMMIT, **payload: object) -> Event:
    return Event(7, 0, 1, 3, trigger, RoundState.REPLAY, RoundState.COMMIT, 1.5, 0.01,
                 dict(payload))


def test_equal_events_and_timings_are_ignored() -> None:
    a = _ev(Trigger.END_TURN, metrics={"decode_s": 1.0, "decode_tps": 9.0, "accepted": 3})
    b = replace(_ev(Trigger.END_TURN, metrics={"decode_s": 2.0, "decode_tps": 4.0,
                                               "accepted": 3}), t=99.0, duration=5.0)
    assert compare_events(a, a) is None
    assert compare_events(a, b) is None


def test_timings_are_the_fields_the_schema_marks_not_a_key_suffix() -> None:
    a = _ev(Trigger.END_TURN, metrics={"decode_s": 1.0, "prefill_tokens": 3})
    b = _ev(Trigger.END_TURN, metrics={"decode_s": 1.0, "prefill_tokens": 4})
    assert compare_events(a, b).field == "payload.metrics.prefill_tokens"
    # Only inside the metrics is `decode_s` a timing: elsewhere it would count.
    m = compare_events(_ev(decode_s=1.0), _ev(decode_s=2.0))
    assert m is not None and m.field == "payload.decode_s"


def test_header_and_nested_payload_paths() -> None:
    a = _ev(append=[1, 2, 3], metrics={"accepted": 3})
    assert compare_events(a, replace(a, round=4)).field == "round"
    m = compare_events(a, replace(a, trigger=Trigger.RESTORE))
    assert (m.field, m.expected, m.actual) == ("trigger", "commit", "restore")
    m = compare_events(a, _ev(append=[1, 5, 3], metrics={"accepted": 3}))
    assert (m.field, m.expected, m.actual) == ("payload.append[1]", 2, 5)
    m = compare_events(a, _ev(append=[1, 2], metrics={"accepted": 3}))
    assert (m.field, m.expected, m.actual) == ("payload.append.length", 3, 2)
    m = compare_events(a, _ev(append=[1, 2, 3], metrics={"accepted": 4}))
    assert m.field == "payload.metrics.accepted"
    m = compare_events(a, _ev(append=[1, 2, 3], metrics={"accepted": 3}, extra=1))
    assert (m.field, m.expected) == ("payload.extra", "<missing>")


def test_digests_exact_unless_skipped_across_devices() -> None:
    a, b = _ev(digest="aaaa", position=5), _ev(digest="bbbb", position=5)
    assert compare_events(a, b).field == "payload.digest"
    assert compare_events(a, b, Tolerance(digests=False)) is None
    assert compare_events(a, _ev(digest="bbbb", position=6),
                          Tolerance(digests=False)).field == "payload.position"


def test_state_truth_messages_quote_digests_but_the_error_stays_compared() -> None:
    def violation(digest: str, error: float) -> Event:
        return _ev(Trigger.INVARIANT_VIOLATION, invariant="state_truth",
                   message=f"state digest {digest} != ...",
                   details={"digest": digest, "expected": digest + "x", "error": error})

    skip = Tolerance(rel=1e-3, digests=False)
    assert compare_events(violation("aa", 0.5), violation("bb", 0.5)).field == "payload.message"
    assert compare_events(violation("aa", 0.5), violation("bb", 0.50001), skip) is None
    m = compare_events(violation("aa", 0.5), violation("bb", 0.6), skip)
    assert m.field == "payload.details.error"


def test_float_tolerance_is_relative_and_ints_stay_exact() -> None:
    a = _ev(f_keep=0.5, position=10)
    assert compare_events(a, _ev(f_keep=0.5000001, position=10)).field == "payload.f_keep"
    assert compare_events(a, _ev(f_keep=0.5000001, position=10), Tolerance(rel=1e-5)) is None
    assert compare_events(a, _ev(f_keep=0.5, position=11), Tolerance(rel=0.5)) is not None


def test_a_live_non_finite_float_equals_its_stored_name() -> None:
    stored = _ev(details={"error": "Infinity", "spread": ["NaN", 1.0]})
    live = _ev(details={"error": float("inf"), "spread": [float("nan"), 1.0]})
    assert compare_events(stored, live) is None
    m = compare_events(stored, _ev(details={"error": float("-inf"), "spread": ["NaN", 1.0]}))
    assert (m.field, m.expected) == ("payload.details.error", "Infinity")
