"""`--set key=value`: one run setting changed, typed and range-checked like the
configuration's field (the same metadata the `run` flags come from)."""

from collections.abc import Iterable
from dataclasses import Field, fields
from enum import StrEnum
from typing import Any

from engine.config import RunConfig, out_of_bounds
from specledger.errors import UsageError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_settings(items: Iterable[str]) -> dict[str, Any]:
    """`["eog_policy=truncate", "draft-max=4"]` -> `{"eog_policy": "truncate", "draft_max":
    4}`; names may use dashes, values take the field's type."""
    known = {f.name: f for f in fields(RunConfig)}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        name = key.strip().replace("-", "_")
        if not sep or not name:
            raise UsageError(f"--set '{item}': expected key=value")
        if name not in known:
            raise UsageError(f"--set '{item}': unknown setting '{name}' (known: "
                             f"{', '.join(sorted(known))})")
        out[name] = _typed(known[name], raw.strip())
    return out


def _typed(f: Field[Any], raw: str) -> Any:
    kind = f.type
    if kind is bool:
        if raw.lower() in _TRUE | _FALSE:
            return raw.lower() in _TRUE
        raise UsageError(f"--set {f.name}={raw}: expected true or false")
    if isinstance(kind, type) and issubclass(kind, StrEnum):
        if raw not in {m.value for m in kind}:
            raise UsageError(f"--set {f.name}={raw}: expected one of "
                             f"{', '.join(m.value for m in kind)}")
        return raw
    value: Any = raw
    if kind in (int, float):
        try:
            value = kind(raw)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise UsageError(f"--set {f.name}={raw}: expected {what}") from None
    problem = out_of_bounds(f, value)
    if problem:
        raise UsageError(f"--set {f.name}={raw}: {problem}")
    return value
