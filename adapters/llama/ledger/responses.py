"""llama-server's answers to the requests of a session, as recorded by the client: the
OpenAI-style completion objects (or the last chunk of a stream, which carries the same
`usage` and `timings`), read from a JSON array or JSON Lines file.

Each answer's `timings` are the engine's own per-request counts: `cache_n` (prompt tokens
reused from the slot; ik_llama.cpp's answers give it in `usage` only), `prompt_n`
(processed), `predicted_n` (generated), `draft_n` and `draft_n_accepted`. The ledger
matches answers to the log's tasks by their shape (prompt length and generated tokens, in
order) and cross-checks the rest.
"""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.llama.errors import LlamaError
from adapters.protocol import read_answers_file


class ResponsesError(LlamaError):
    """A responses file cannot be read or holds no llama-server answer."""


@dataclass(frozen=True)
class ResponseFacts:
    """One answer's counts and identity."""

    index: int
    cache_n: int
    prompt_n: int
    predicted_n: int
    draft_n: int
    draft_accepted: int
    finish_reason: str | None
    fingerprint: str | None

    @property
    def prompt_tokens(self) -> int:
        """The request's whole prompt: reused plus processed."""
        return self.cache_n + self.prompt_n


@dataclass(frozen=True)
class Responses:
    """The answers of a responses file, its digest, and how many objects had no timings."""

    facts: list[ResponseFacts]
    sha256: str
    without_timings: int


_COUNTS = ("cache_n", "prompt_n", "predicted_n", "draft_n", "draft_n_accepted")
"""The `timings` counts an answer's facts take, in `ResponseFacts`' order."""


def response_facts(index: int, doc: dict[str, Any], name: str = "responses"
                   ) -> ResponseFacts | None:
    """The facts of one answer object, or None when it carries no `timings`; a count that
    is not a whole number is refused (`name` is the file, for the message)."""
    t = doc.get("timings")
    if not isinstance(t, dict):
        return None
    usage = doc.get("usage")
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    if "cache_n" not in t and isinstance(details, dict) and "cached_tokens" in details:
        # ik_llama.cpp's timings name no cache_n: its answers give the reused prompt in
        # `usage` only.
        t = {**t, "cache_n": details["cached_tokens"]}
    counts = [_count(t, key, index, name) for key in _COUNTS]
    choices = doc.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else {}
    reason = first.get("finish_reason") if isinstance(first, dict) else None
    return ResponseFacts(index, *counts, reason, doc.get("system_fingerprint"))


def _count(timings: dict[str, Any], key: str, index: int, name: str) -> int:
    value = timings.get(key, 0)
    if isinstance(value, bool) or not (isinstance(value, int) or (
            isinstance(value, float) and value.is_integer())) or value < 0:
        raise ResponsesError(f"{name}: answer {index + 1}'s timings.{key} is {value!r}, not a "
                             "count: pass the answers llama-server sent, unedited")
    return int(value)


def parse_responses(text: str, name: str = "responses") -> Responses:
    """The answers in `text`: a JSON array of objects, or one object per line."""
    try:
        doc = json.loads(text)
        items = doc if isinstance(doc, list) else [doc]
    except json.JSONDecodeError:
        try:
            items = [json.loads(ln) for ln in text.splitlines() if ln.strip()]
        except json.JSONDecodeError as exc:
            raise ResponsesError(f"{name} is neither JSON nor JSON Lines ({exc.msg} at line "
                                 f"{exc.lineno}): pass the answers the client received") from None
    objects = [x for x in items if isinstance(x, dict)]
    facts = [f for i, x in enumerate(objects)
             if (f := response_facts(i, x, name)) is not None]
    if not facts:
        raise ResponsesError(f"{name} holds no llama-server answer with `timings` "
                             f"({len(items)} item(s))")
    digest = hashlib.sha256(text.encode()).hexdigest()
    return Responses(facts, digest, len(objects) - len(facts))


def read_responses(path: str | Path) -> Responses:
    """The answers in the file at `path`."""
    return parse_responses(read_answers_file(path, ResponsesError), str(Path(path)))


def match_responses(shapes: list[tuple[int | None, int | None]],
                    facts: list[ResponseFacts]) -> list[ResponseFacts | None]:
    """For each task shape (prompt tokens, generated tokens; None where the log does not
    say), in log order, the first unused answer of that shape; None where none fits."""
    unused = list(facts)
    out: list[ResponseFacts | None] = []
    for prompt, generated in shapes:
        pick = next((f for f in unused if (generated is None or f.predicted_n == generated)
                     and (prompt is None or f.prompt_tokens == prompt)), None)
        if pick is not None:
            unused.remove(pick)
        out.append(pick)
    return out
