"""The payloads' JSON: compact, standard (RFC 8259) on every backend, and fast both ways.

PostgreSQL's `json` type refuses Python's `NaN` and `Infinity` tokens, and a ledger must
read the same wherever it is stored, so a non-finite float is written as its name in a
JSON string ("NaN", "Infinity", "-Infinity") on SQLite too; `as_stored` gives any value
the form it takes in the log, so a live event compares equal to its stored twin.
"""

import json
import json.encoder
import math
from typing import Any

import orjson

_PLAIN = json.JSONEncoder(separators=(",", ":"), check_circular=False, allow_nan=False)
# `JSONEncoder.encode` builds a new C encoder on every call, which cost more than encoding
# a small payload; one made once halves it. Without the C accelerator, the plain encoder.
_C_ENCODE = (
    None if json.encoder.c_make_encoder is None else json.encoder.c_make_encoder(
        # markers, default, str encoder, indent, key sep, item sep, sort_keys, skipkeys,
        # allow_nan
        None, _PLAIN.default, json.encoder.encode_basestring_ascii, None, ":", ",",
        False, False, False)
)


def as_stored(value: Any) -> Any:
    """`value` as the log stores it: non-finite floats replaced by their names, at any depth."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: as_stored(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_stored(v) for v in value]
    return value


def encode_json(obj: Any) -> str:
    """Compact standard JSON text of a payload or configuration."""
    try:
        if _C_ENCODE is None:
            return _PLAIN.encode(obj)
        return "".join(_C_ENCODE(obj, 0))
    except ValueError:  # a non-finite float somewhere: rare, so only then walk the value
        return encode_json(as_stored(obj))


def decode_json(text: str) -> Any:
    """The value of JSON text. orjson parses a payload in a third of the standard library's
    time; it refuses the `NaN` tokens of ledgers written before payloads became standard
    JSON, which the standard parser still reads (`eventlog.migrate` rewrites them)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
