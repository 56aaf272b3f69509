"""vLLM's periodic stats lines (V1 engines, `vllm/v1/metrics/loggers.py` and
`spec_decode/metrics.py`), read by their `Name: value` fields, so a field a version adds,
drops or renames costs only its own row:

- `Engine 000: Avg prompt throughput: 2.5 tokens/s, Avg generation throughput: 74.7
  tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 7.4%, Prefix cache hit
  rate: 0.0%[, MM cache hit rate: z%]`, the KV cache named by its device (`CPU KV cache
  usage` on our CPU build), and 0.32's `Preemptions: N` where there were some;
- `SpecDecoding metrics: Mean acceptance length: 2.87, Accepted throughput: 48.90 tokens/s,
  Drafted throughput: 157.19 tokens/s, Accepted: 489 tokens, Drafted: 1572 tokens,
  Per-position acceptance rate: 0.740, 0.473, ..., Avg Draft acceptance rate: 31.1%`.

A value is read as printed (a percentage over 100); a figure the line does not print stays
None. V0 engines' `Speculative metrics:` lines are not read: no log we hold shows one.
"""

import re
from collections.abc import Callable
from typing import Any

from adapters.logs.intervals.run import IntervalKind, IntervalLine

ENGINE = re.compile(r"^Engine (\d+): ")
SPEC = re.compile(r"^SpecDecoding metrics: ")
_KEY = re.compile(r"(?:^|, ?)([A-Za-z][A-Za-z #()/-]*?): ")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _num(text: str) -> float | None:
    m = _NUMBER.search(text)
    return float(m.group()) if m is not None else None


def _int(text: str) -> int | None:
    x = _num(text)
    return int(x) if x is not None else None


def _percent(text: str) -> float | None:
    x = _num(text)
    return round(x / 100, 6) if x is not None else None


def _ratios(text: str) -> list[float] | None:
    xs = [float(x) for x in _NUMBER.findall(text)]
    return xs or None


_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "Avg prompt throughput": ("prompt_tps", _num),
    "Avg generation throughput": ("generation_tps", _num),
    "Running": ("running", _int),
    "Waiting": ("waiting", _int),
    "KV cache usage": ("kv_usage", _percent),
    "Prefix cache hit rate": ("prefix_hit_rate", _percent),
    "MM cache hit rate": ("mm_hit_rate", _percent),
    "Preemptions": ("preemptions", _int),
    "Mean acceptance length": ("mean_accept_len", _num),
    "Accepted throughput": ("accepted_tps", _num),
    "Drafted throughput": ("drafted_tps", _num),
    "Accepted": ("accepted", _int),
    "Drafted": ("drafted", _int),
    "Per-position acceptance rate": ("acc_per_pos", _ratios),
    "Avg Draft acceptance rate": ("draft_acceptance", _percent),
}
"""Each field name vLLM prints: the interval's attribute and how its value reads."""
_EXTRA = frozenset({"mm_hit_rate", "preemptions"})
"""Attributes that go to the payload's optional keys."""


def fields(text: str) -> dict[str, Any]:
    """The known `Name: value` fields of a stats line's text (after its `Engine NNN: ` or
    `SpecDecoding metrics: `), by attribute."""
    keys = list(_KEY.finditer(text))
    out: dict[str, Any] = {}
    for m, nxt in zip(keys, [*keys[1:], None], strict=False):
        name = m.group(1)
        # `GPU KV cache usage`, `CPU KV cache usage`, `XPU ...`: the device the engine names
        known = _FIELDS.get("KV cache usage" if name.endswith(" KV cache usage") else name)
        if known is None:
            continue
        value = text[m.end():nxt.start() if nxt is not None else len(text)]
        out[known[0]] = known[1](value)
    return out


def stats_interval(message: str, line: int, clock: str | None, at: float | None
                   ) -> IntervalLine | None:
    """The interval a stats line gives (None: the message is no stats line, such as
    `Engine 000: vllm cache_config_info ...`, which names no figure)."""
    m = ENGINE.match(message)
    kind = IntervalKind.ENGINE
    if m is None:
        m, kind = SPEC.match(message), IntervalKind.SPEC
    if m is None:
        return None
    figures = fields(message[m.end():])
    if not figures:
        return None
    iv = IntervalLine(line, kind, clock, at,
                      engine=int(m.group(1)) if kind is IntervalKind.ENGINE else None)
    apply(iv, figures)
    return iv


def apply(iv: IntervalLine, figures: dict[str, Any]) -> None:
    """Set an interval's figures (the engine-specific ones in its `extra`)."""
    for name, value in figures.items():
        if name in _EXTRA:
            iv.extra[name] = value
        else:
            setattr(iv, name, value)


SPEC_FIELDS = ("mean_accept_len", "accepted_tps", "drafted_tps", "accepted", "drafted",
               "acc_per_pos", "draft_acceptance")
"""The figures a SpecDecoding line gives, which join its Engine line's interval."""


def join_spec(engine: IntervalLine, spec: IntervalLine) -> bool:
    """Put a SpecDecoding line's figures into the Engine line's interval it was printed
    with (same time, the engine line's own spec figures empty); whether it joined."""
    if engine.kind is not IntervalKind.ENGINE or engine.clock != spec.clock or engine.speculative:
        return False
    for name in SPEC_FIELDS:
        setattr(engine, name, getattr(spec, name))
    return True
