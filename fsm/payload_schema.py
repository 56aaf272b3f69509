"""Reading the payload types of fsm/payloads.py: their keys and fields, the paths a
comparison skips, and whether a dict is its trigger's payload (for tests and the checking
recorder; readers trust what the recorder was given)."""

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, NotRequired, Union, get_args, get_origin, get_type_hints, is_typeddict

from fsm.payloads import PAYLOADS, Field
from fsm.states import Trigger


@dataclass(frozen=True, slots=True)
class Key:
    """One key of a payload type: its name, type, whether it must be present, its `Field`."""

    name: str
    type: Any
    required: bool
    field: Field


def keys(td: type) -> list[Key]:
    """The keys of payload type `td`, in declaration order."""
    out = []
    for name, hint in get_type_hints(td, include_extras=True).items():
        if get_origin(hint) is NotRequired:
            hint = get_args(hint)[0]
        base, meta = get_args(hint)[:2]
        out.append(Key(name, base, name in td.__required_keys__, meta))
    return out


def _paths(td: type, flag: str, prefix: str = "") -> Iterator[str]:
    for k in keys(td):
        if getattr(k.field, flag):
            yield prefix + k.name
        if is_typeddict(k.type):
            yield from _paths(k.type, flag, f"{prefix}{k.name}.")


def marked(flag: str) -> dict[Trigger, frozenset[str]]:
    """Per trigger, the dotted paths of its payload's fields with `flag` ("timing" or
    "digest") set, such as `metrics.decode_s`."""
    return {t: frozenset(_paths(td, flag)) for t, td in PAYLOADS.items()}


def check_payload(trigger: Trigger, payload: Mapping[str, Any]) -> list[str]:
    """Why `payload` is not `trigger`'s payload type: missing, unknown or ill-typed keys
    (empty when it is one)."""
    return _check(PAYLOADS[trigger], payload, "")


def check_events(events: Iterable[Any]) -> list[str]:
    """`check_payload` over events (anything with `seq`, `trigger` and `payload`): one
    line per problem, naming the event."""
    return [f"seq {ev.seq} {ev.trigger.value}: {problem}" for ev in events
            for problem in check_payload(ev.trigger, ev.payload)]


def _check(td: type, payload: Mapping[str, Any], path: str) -> list[str]:
    if not isinstance(payload, Mapping):
        return [f"{path or 'payload'}: {type(payload).__name__}, not an object"]
    known = {k.name: k for k in keys(td)}
    out = [f"{path}{name}: unknown key" for name in payload if name not in known]
    for name, k in known.items():
        if name not in payload:
            if k.required:
                out.append(f"{path}{name}: missing")
        elif not _conforms(payload[name], k.type, f"{path}{name}", out):
            out.append(f"{path}{name}: {payload[name]!r} is not {type_name(k.type)}")
    return out


def _conforms(value: Any, tp: Any, path: str, out: list[str]) -> bool:
    origin = get_origin(tp)
    if tp is Any:
        return True
    if tp is NoneType:
        return value is None
    if origin in (Union, UnionType):
        return any(_conforms(value, arm, path, []) for arm in get_args(tp))
    if is_typeddict(tp):
        out.extend(_check(tp, value, path + "."))
        return True
    if origin is list:
        (arm,) = get_args(tp)
        return isinstance(value, list | tuple) and all(_conforms(v, arm, path, out)
                                                       for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


def type_name(tp: Any) -> str:
    """`tp` as docs/events.md writes it."""
    if tp is NoneType:
        return "null"
    if get_origin(tp) in (Union, UnionType):
        return " | ".join(type_name(a) for a in get_args(tp))
    if get_origin(tp) is list:
        return f"list[{type_name(get_args(tp)[0])}]"
    if is_typeddict(tp):
        return f"`{tp.__name__}`"
    if get_origin(tp) is dict:
        return "object"
    return {int: "int", float: "number", str: "string", bool: "bool"}.get(tp, str(tp))
