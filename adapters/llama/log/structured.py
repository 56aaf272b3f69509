"""The structured server logger's lines, as ik_llama.cpp prints them (and llama.cpp's
server did before its 2024 logger): `INFO [ function] message | tid="…" timestamp=N k=v …`
in text form, or the same fields as one JSON object a line (`--log-format json`).

Beside its newer `slot …: id N | task N |` lines (read as upstream's), ik_llama.cpp logs a
task's start, its prompt's size (-v: `prompt tokenized`), its prompt's first position to
compute (`kv cache rm [p0, end)`), its release, its HTTP request and its build this way;
the prompt cache's view of the common prefix
(`======== Cache: cache_size = N, n_past = N, …`) comes without slot or task and is the
common prefix of the next task's prompt with the slot's tokens.
"""

import json
import re
from dataclasses import dataclass
from typing import Any

from adapters.llama.log.records import Count, Past, Record, RecordKind, Released

K = RecordKind
_TEXT = re.compile(r"^(INFO|WARN|ERR|ERROR|VERB|DEBUG|WARNING) \[\s*([\w~]+)\] (.*?)(?: \|(.*))?$")
_FIELD = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
_CACHE = re.compile(r"^=+ Cache: cache_size = (\d+), n_past =\s+(\d+), n_past_prompt = (\d+)")
# The fields of a line whose message ended in a newline, on a line of their own: ik's
# `LOG_WARNING("%s\n", "ctx_shift is not supported …")` prints `%s` as its message, then
# ` | ="ctx_shift is not supported …"` (the text as a field with no name).
_FIELDS_ALONE = re.compile(r'^ \|(?: \w*=(?:"(?:[^"\\]|\\.)*"|\S+))+$')


@dataclass(frozen=True)
class StructuredLine:
    """One structured logger line: its level, function, message and fields."""

    level: str
    function: str
    message: str
    fields: dict[str, Any]

    def int_field(self, name: str) -> int | None:
        """A field as an integer (None: absent or not a number)."""
        value = self.fields.get(name)
        try:
            return int(value) if value is not None else None
        except (TypeError, ValueError):
            return None


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def structured_line(text: str) -> StructuredLine | None:
    """The structured line `text` is (text or JSON form), or None."""
    if text.startswith("{") and '"msg"' in text:
        try:
            doc = json.loads(text)
        except ValueError:
            return None
        if not isinstance(doc, dict) or "msg" not in doc:
            return None
        fields = {k: v for k, v in doc.items() if k not in ("level", "function", "msg")}
        return StructuredLine(str(doc.get("level", "")), str(doc.get("function", "")),
                              str(doc["msg"]), fields)
    m = _TEXT.match(text)
    if m is None:
        return None
    fields = {k: _value(v) for k, v in _FIELD.findall(m.group(4) or "")}
    return StructuredLine(m.group(1), m.group(2), m.group(3).strip(), fields)


def fields_alone(text: str) -> bool:
    """Whether `text` is the fields of a structured line whose message ended in a newline
    (its first line is known by itself)."""
    return _FIELDS_ALONE.match(text) is not None


def structured_record(s: StructuredLine, line: int, t: float | None) -> Record | None:
    """The record a structured line carries (a task started, its prompt's size (-v), a
    prompt batch's start, a release), or None for the others."""
    slot, task = s.int_field("id_slot"), s.int_field("id_task")
    ctx = {"line": line, "t": t, "slot": slot, "task": task}
    if slot is None or task is None:
        return None
    if s.message == "slot is processing task":
        return Count(kind=K.TASK_STARTED, n=0, **ctx)
    if s.message == "prompt tokenized" and s.int_field("n_prompt_tokens") is not None:
        return Count(kind=K.PROMPT, n=s.int_field("n_prompt_tokens") or 0, **ctx)
    if s.message.startswith("kv cache rm") and s.int_field("p0") is not None:
        return Count(kind=K.CACHED, n=s.int_field("p0") or 0, **ctx)
    if s.message == "slot released":
        n = s.int_field("n_cache_tokens")
        n = n if n is not None else s.int_field("n_past")
        if n is None:
            return None
        return Released(kind=K.RELEASED, n_tokens=n, truncated=bool(s.fields.get("truncated")),
                        **ctx)
    return None


def cache_prefix(text: str, line: int, t: float | None) -> Past | None:
    """ik_llama.cpp's prompt-cache line: the common prefix (`n_past`) of the next task's
    prompt with its slot's tokens, as a PAST record of no slot yet (None: not that line)."""
    m = _CACHE.match(text)
    if m is None:
        return None
    return Past(kind=K.PAST, lcp=int(m.group(2)), held=int(m.group(1)), line=line, t=t,
                slot=None, task=None)


# The server facts structured lines state, as ServerInfo's fields: that the model loaded
# (None: the line says it), the slots, each slot's context (the line's field).
_FACTS: dict[str, tuple[str, str | None]] = {
    "model loaded": ("loaded", None),
    "initializing slots": ("n_slots", "n_slots"),
    "new slot": ("n_ctx_slot", "n_ctx_slot"),
}


def structured_fact(s: StructuredLine) -> tuple[str, int | bool] | None:
    """The server fact a structured line states, as a ServerInfo field and its value (the
    model loaded, the slots, a slot's context), else None."""
    fact = _FACTS.get(s.message)
    if fact is None:
        return None
    name, field = fact
    value = True if field is None else s.int_field(field)
    return None if value is None else (name, value)


def structured_build(s: StructuredLine) -> str | None:
    """The build a structured `build info` line names, in the banner's wording
    (`build N (commit)`), else None."""
    if s.message != "build info" or "build" not in s.fields:
        return None
    return f"build {s.fields['build']} ({s.fields.get('commit', '?')})"


def structured_http(s: StructuredLine) -> tuple[str, int] | None:
    """The request and status of a structured `request` line, else None."""
    status = s.int_field("status")
    if s.message != "request" or status is None:
        return None
    return f"{s.fields.get('method', '?')} {s.fields.get('path', '?')}", status
