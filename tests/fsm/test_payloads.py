"""The payload types: docs/events.md is generated from them, every trigger has one, and
`check_payload` refuses what is not one."""

from pathlib import Path

import pytest

from fsm.events_doc import splice
from fsm.payload_schema import check_payload, keys, marked
from fsm.payloads import EVENT_SCHEMA_VERSION, PAYLOADS, Field
from fsm.states import Trigger

DOCS = Path(__file__).parents[2] / "docs" / "events.md"


def test_docs_events_md_tables_are_generated_from_the_types() -> None:
    text = DOCS.read_text()
    assert text == splice(text), "run: python -m fsm.events_doc"
    assert f"\n- {EVENT_SCHEMA_VERSION}: " in text.partition("## Versions")[2], (
        "docs/events.md#versions says what the current schema version changed")


def test_splice_refuses_a_file_without_its_markers() -> None:
    with pytest.raises(ValueError, match="lacks its markers"):
        splice("# Event schema\n")


def test_every_trigger_has_a_payload_type_with_documented_fields() -> None:
    assert set(PAYLOADS) == set(Trigger)
    for td in PAYLOADS.values():
        assert td.__doc__
        for k in keys(td):
            assert isinstance(k.field, Field) and k.field.doc, (td.__name__, k.name)


def test_timings_and_digests_come_from_the_schema() -> None:
    timings, digests = marked("timing"), marked("digest")
    assert timings[Trigger.END_TURN] >= {"metrics.decode_s", "metrics.decode_tps"}
    assert "metrics.prefill_tokens" not in timings[Trigger.END_TURN]
    assert digests[Trigger.COMMIT] == {"digest"}
    assert not timings[Trigger.COMMIT]


@pytest.mark.parametrize(("payload", "problem"), [
    ({"append": [1], "position": 3, "accepted": 0}, "cut: missing"),
    ({"append": [1], "position": 3, "accepted": 0, "cut": 0, "extra": 1}, "extra: unknown key"),
    ({"append": [1], "position": "3", "accepted": 0, "cut": 0}, "position: '3' is not int"),
    ({"append": [1], "position": 3, "accepted": True, "cut": 0}, "accepted: True is not int"),
    ({"append": ["a"], "position": 3, "accepted": 0, "cut": 0}, "append: ['a'] is not"),
    ({"append": [1], "position": 3, "accepted": 0, "cut": 0, "digest": None},
     "digest: None is not string"),
])
def test_check_payload_names_what_is_wrong(payload: dict, problem: str) -> None:
    found = check_payload(Trigger.COMMIT, payload)
    assert len(found) == 1 and found[0].startswith(problem), found


def test_optional_keys_may_be_absent_and_nullable_ones_null() -> None:
    assert check_payload(Trigger.COMMIT, {"append": [None, 7], "position": 3, "accepted": 1,
                                          "cut": 0}) == []
    assert check_payload(Trigger.ACCEPT, {"matched": 2, "eog": None}) == []
    assert check_payload(Trigger.ACCEPT, {"matched": 2}) == ["eog: missing"]
    assert check_payload(Trigger.NEXT, {}) == []


def test_nested_metrics_are_checked() -> None:
    bad = check_payload(Trigger.END_TURN, {"metrics": {"slot": 0}})
    assert "metrics.turn: missing" in bad
