"""A turn's figures are declared once (`TurnMetrics`): END_TURN's row is generated from the
declaration, so that each figure's meaning, unit and timing flag is said in one place."""

from dataclasses import fields

from hypothesis import given
from hypothesis import strategies as st

from fsm.payload_schema import check_payload, keys
from fsm.payloads import TurnMetricsRow
from fsm.states import Trigger
from fsm.turn_metrics import KEY, RATES, TurnMetrics


def test_the_row_holds_each_declared_figure_and_rate_first_with_its_metadata() -> None:
    declared = [(f.name, f.metadata) for f in fields(TurnMetrics)] + list(RATES.items())
    row = keys(TurnMetricsRow)[: len(declared)]
    assert [k.name for k in row] == [name for name, _ in declared]
    for k, (_, meta) in zip(row, declared, strict=True):
        assert (k.field.doc, k.field.unit, k.field.timing) == (
            meta["doc"], meta["unit"], meta["timing"])
        assert k.required
        assert (k.name in KEY) == (k.type in (int, float)), k.name  # else None when unknown


@given(st.builds(TurnMetrics, slot=st.integers(0, 7), turn=st.integers(1, 50),
                 drafted=st.integers(0, 500), accepted=st.integers(0, 500),
                 decode_s=st.floats(0, 10), f_keep=st.floats(0, 1)))
def test_a_turn_s_dict_is_its_end_turn_row_and_reads_back(m: TurnMetrics) -> None:
    row = m.to_dict()
    assert check_payload(Trigger.END_TURN, {"metrics": row}) == []
    assert TurnMetrics.from_dict(row) == m
