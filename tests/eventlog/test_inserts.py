"""An event's stored body: the fast encoder must store what the careful one would."""

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from eventlog.inserts import encode_body
from eventlog.jsoncodec import decode_json, encode_json

_SCALARS = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats()
            | st.text(max_size=8))
_PAYLOADS = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=4) | st.integers(-9, 9), inner, max_size=4), max_leaves=12)


@given(_PAYLOADS, st.floats(allow_nan=False, allow_infinity=False))
def test_a_body_reads_back_as_the_standard_encoding_of_its_fields(
        payload: Any, t: float) -> None:
    fields: list[Any] = [7, 0, 1, 2, "commit", 0.25, "engine", t, payload, "done"]
    text = encode_body(*fields)
    json.loads(text)  # standard JSON: no NaN tokens, whatever the payload held
    assert decode_json(text) == decode_json(encode_json(fields))
