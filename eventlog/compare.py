"""Comparing two events field by field, the way re-execution and diff need it.

Timings never count: an event's `t` and `duration`, and the payload fields the schema marks
as timings (docs/events.md; the turn metrics' prefill_s, decode_s, ..., decode_tps) differ
between two runs of the same thing on a wall clock. Digests (the fields the schema marks
so) count exactly unless the comparison is across devices, where float rounding makes
bit-exact state digests meaningless and only the numbers compared within a relative
tolerance remain. Values compare as Python values
(1 == 1.0), as the payloads come back from JSON, where a non-finite float is stored as its
name (eventlog/jsoncodec.py).
"""

import math
from dataclasses import dataclass
from enum import StrEnum
from operator import attrgetter
from typing import Any

from eventlog.jsoncodec import as_stored
from fsm.event import Event
from fsm.invariants import Invariant
from fsm.payload_schema import marked
from fsm.payloads import InvariantViolation
from fsm.states import Trigger

_HEADER = ("seq", "slot", "turn", "round", "trigger", "source", "dest")
_header = attrgetter(*_HEADER)
_TIMINGS = marked("timing")
_DIGESTS = marked("digest")
# A state-truth violation quotes both digests in its message and details.
_STATE_TRUTH_QUOTES = frozenset({"message", "details.digest", "details.expected"})


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
    ha, hb = _header(expected), _header(actual)
    if ha != hb:  # tuples compared in C; the field is looked for only when one differs
        name, a, b = next((n, a, b) for n, a, b in zip(_HEADER, ha, hb, strict=True) if a != b)
        return Mismatch(name, _plain(a), _plain(b))
    pa, pb = expected.payload, actual.payload
    if pa == pb:  # the common case, at C speed
        return None
    return _walk("payload", pa, pb, tol, _skipped(expected, tol))


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, StrEnum) else value


def _skipped(ev: Event, tol: Tolerance) -> frozenset[str]:
    """The payload paths (`metrics.decode_s`) not compared: timings, and digests unless
    `tol` compares them."""
    skip = _TIMINGS[ev.trigger]
    if tol.digests:
        return skip
    if ev.trigger is Trigger.INVARIANT_VIOLATION:
        p: InvariantViolation = ev.payload
        if p["invariant"] == Invariant.STATE_TRUTH.value:
            return skip | _STATE_TRUTH_QUOTES  # the audit error stays compared
    return skip | _DIGESTS[ev.trigger]


def _walk(path: str, a: Any, b: Any, tol: Tolerance, skip: frozenset[str],
          rel: str = "") -> Mismatch | None:
    """The first difference under `path`; `rel` is its place in the payload, which is
    what `skip` names."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in (*a, *(k for k in b if k not in a)):
            if rel + key in skip:
                continue
            if key not in a or key not in b:
                return Mismatch(f"{path}.{key}", a.get(key, _MISSING), b.get(key, _MISSING))
            found = _walk(f"{path}.{key}", a[key], b[key], tol, skip, f"{rel}{key}.")
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _walk(f"{path}[{i}]", x, y, tol, skip, rel)
            if found is not None:
                return found
        if len(a) != len(b):
            return Mismatch(f"{path}.length", len(a), len(b))
        return None
    if _numbers_close(a, b, tol.rel) or a == b or as_stored(a) == as_stored(b):
        return None  # the last: a live non-finite float against its stored name
    return Mismatch(path, a, b)


_MISSING = "<missing>"


def _numbers_close(a: Any, b: Any, rel: float) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            return False
        return math.isclose(a, b, rel_tol=rel, abs_tol=rel) or (math.isnan(a) and math.isnan(b))
    return False
