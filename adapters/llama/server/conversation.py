"""One multi-turn conversation with llama-server through its OpenAI-compatible API, with
the official `openai` client: each turn sends the whole history plus the new question,
as a chat client does, streamed (server-sent events) or in one response.

Each request sends every sampling parameter the session records and every other one at the
value that leaves its sampler idle, with the chain in our order (adapters/llama/ledger/sampler.py):
llama-server fills what a request leaves out with its own defaults (min_p 0.05, ...).
Every answer is kept as the completion object the client got (for a stream, its last
chunk, which carries `usage` and llama-server's `timings`), so the session can be
cross-checked against the server's log; `prompt_ids` asks the server itself how it
tokenized each request's prompt (its chat template, then its tokenizer).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from adapters.llama.errors import LlamaError
from adapters.llama.ledger.sampler import request_fields
from adapters.protocol import Messages, Sampling


class ConversationError(LlamaError):
    """A chat request failed (the server refused it, or stopped answering)."""


@dataclass(frozen=True)
class Exchange:
    """One turn: the question, the answer's text, the answer object, and the prompt's
    token ids as the server tokenized them (None when not asked)."""

    question: str
    answer: str
    response: dict[str, Any]
    prompt_ids: list[int] | None


def _request(sampling: Sampling, messages: Messages, stream: bool) -> dict[str, Any]:
    openai, llama = request_fields(sampling.temperature, sampling.top_k, sampling.top_p,
                                   sampling.seed)
    body: dict[str, Any] = {
        "model": "specledger", "messages": messages, "max_tokens": sampling.max_tokens,
        "stream": stream, **openai,
        "extra_body": llama,  # llama.cpp's own sampler options
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def ask(client: Any, sampling: Sampling, messages: Messages, stream: bool
        ) -> tuple[str, dict[str, Any]]:
    """One chat completion: (the answer's text, the answer object)."""
    import openai

    try:
        if not stream:
            done = client.chat.completions.create(**_request(sampling, messages, False))
            return done.choices[0].message.content or "", done.model_dump()
        text, last = [], None
        for chunk in client.chat.completions.create(**_request(sampling, messages, True)):
            doc = chunk.model_dump()
            for choice in doc.get("choices") or []:
                text.append((choice.get("delta") or {}).get("content") or "")
            last = doc
    except openai.APIError as exc:
        raise ConversationError(f"llama-server chat request failed: "
                                f"{type(exc).__name__}: {exc}".splitlines()[0]) from None
    if last is None:
        raise ConversationError("llama-server's stream ended without a chunk")
    return "".join(text), last


def converse(client: Any, questions: Sequence[str], sampling: Sampling, *, stream: bool,
             prompt_ids: Callable[[Messages], list[int]] | None = None,
             on_answer: Callable[[Exchange], None] | None = None) -> list[Exchange]:
    """Ask `questions` one after another in one conversation; `on_answer` sees each
    exchange as it completes."""
    messages: Messages = []
    out: list[Exchange] = []
    for question in questions:
        messages.append({"role": "user", "content": question})
        ids = prompt_ids(messages) if prompt_ids is not None else None
        answer, response = ask(client, sampling, messages, stream)
        messages.append({"role": "assistant", "content": answer})
        exchange = Exchange(question, answer, response, ids)
        out.append(exchange)
        if on_answer is not None:
            on_answer(exchange)
    return out
