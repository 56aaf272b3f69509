"""`--set key=value`: one run setting changed, typed like the configuration's field."""

from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from engine.config import RunConfig
from engine.errors import ConfigError

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_settings(items: Iterable[str]) -> dict[str, Any]:
    """`["eog_policy=truncate", "draft-max=4"]` -> `{"eog_policy": "truncate", "draft_max":
    4}`; names may use dashes, values take the field's type."""
    types = {f.name: f.type for f in fields(RunConfig)}
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        name = key.strip().replace("-", "_")
        if not sep or not name:
            raise ConfigError(f"--set '{item}': expected key=value")
        if name not in types:
            raise ConfigError(f"--set '{item}': unknown setting '{name}' (known: "
                              f"{', '.join(sorted(types))})")
        out[name] = _typed(name, types[name], raw.strip())
    return out


def _typed(name: str, kind: Any, raw: str) -> Any:
    if kind is bool:
        if raw.lower() in _TRUE | _FALSE:
            return raw.lower() in _TRUE
        raise ConfigError(f"--set {name}={raw}: expected true or false")
    if kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise ConfigError(f"--set {name}={raw}: expected {what}") from None
    return raw  # strings and choices: RunConfig validates them and names the choices
