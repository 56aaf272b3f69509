"""Comparing two events field by field, the way re-execution and diff need it.

Timings never count: an event's `t` and `duration`, and any payload key ending in `_s` or
`_tps` (the turn metrics' prefill_s, decode_s, rollback_s, decode_tps) differ between
two runs of the same thing on a wall clock. Digests count exactly unless the comparison is
across devices, where float rounding makes bit-exact state digests meaningless and only
the numbers compared within a relative tolerance remain. Values compare as Python values
(1 == 1.0), as the payloads come back from JSON, where a non-finite float is stored as its
name (eventlog/jsoncodec.py).
"""

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eventlog.jsoncodec import as_stored
from fsm.event import Event
from fsm.invariants import Invariant
from fsm.states import Trigger

_HEADER = ("seq", "slot", "turn", "round", "trigger", "source", "dest")
_DIGEST_KEYS = frozenset({"digest", "expected_digest"})


@dataclass(frozen=True, slots=True)
class Tolerance:
    """How strict a comparison is: `rel` is the relative tolerance for float fields (0:
    exact); `digests` False skips state digests (and the state-truth messages that quote
    them), for comparing runs on different devices."""

    rel: float = 0.0
    digests: bool = True

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"rel": self.rel, "digests": "exact" if self.digests else "skipped"}


EXACT = Tolerance()


@dataclass(frozen=True, slots=True)
class Mismatch:
    """The first differing field: a dotted path such as `payload.targets[3]`."""

    field: str
    expected: Any
    actual: Any


def compare_events(expected: Event, actual: Event, tol: Tolerance = EXACT) -> Mismatch | None:
    """The first field where `actual` differs from `expected`, or None when they agree."""
    for name in _HEADER:
        a, b = getattr(expected, name), getattr(actual, name)
        if a != b:
            return Mismatch(name, _plain(a), _plain(b))
    pa, pb = expected.payload, actual.payload
    if pa == pb:  # the common case, at C speed
        return None
    skip = _skipped_keys(expected, tol)
    return _walk("payload", pa, pb, tol, skip)


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, StrEnum) else value


def _skipped_keys(ev: Event, tol: Tolerance) -> frozenset[str]:
    if tol.digests:
        return frozenset()
    if ev.trigger is Trigger.INVARIANT_VIOLATION and (
        ev.payload.get("invariant") == Invariant.STATE_TRUTH.value
    ):
        # The message and details quote the two digests; the audit error stays compared.
        return _DIGEST_KEYS | {"message", "expected"}
    return _DIGEST_KEYS


def _walk(path: str, a: Any, b: Any, tol: Tolerance, skip: frozenset[str]) -> Mismatch | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in (*a, *(k for k in b if k not in a)):
            if key in skip or _is_timing(key):
                continue
            if key not in a or key not in b:
                return Mismatch(f"{path}.{key}", a.get(key, _MISSING), b.get(key, _MISSING))
            found = _walk(f"{path}.{key}", a[key], b[key], tol, skip)
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _walk(f"{path}[{i}]", x, y, tol, skip)
            if found is not None:
                return found
        if len(a) != len(b):
            return Mismatch(f"{path}.length", len(a), len(b))
        return None
    if _numbers_close(a, b, tol.rel) or a == b or as_stored(a) == as_stored(b):
        return None  # the last: a live non-finite float against its stored name
    return Mismatch(path, a, b)


_MISSING = "<missing>"


def _is_timing(key: str) -> bool:
    return key.endswith("_s") or key.endswith("_tps")


def _numbers_close(a: Any, b: Any, rel: float) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            return False
        return math.isclose(a, b, rel_tol=rel, abs_tol=rel) or (math.isnan(a) and math.isnan(b))
    return False
