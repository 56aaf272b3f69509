"""One multi-turn conversation with vLLM's server through the official `openai` client, as
a chat client has it: each turn sends the whole history plus the new question, streamed.

Every request asks vLLM for the token ids it used (`return_token_ids`: the prompt as its
chat template and tokenizer made it, in the first chunk; each chunk's generated ids), and
sends every sampling parameter the session records, the others at the value that leaves
them idle (vLLM's defaults, said anyway). The stream is read as it comes: each chunk is
then one engine step, which places the turn's rounds (adapters/vllm/steps.py). Around each
request `/metrics` is read, so the difference is that request's counters: the server
answers this one conversation only.

An exchange is kept as a plain JSON record (`ExchangeRecord`), the file the session is
recorded from.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from adapters.protocol import Messages, Sampling
from adapters.vllm.errors import ServerDiedError, VllmError
from adapters.vllm.metrics import parse_counters
from adapters.vllm.options import SERVED_NAME

ExchangeRecord = dict[str, Any]
"""One turn as recorded: `question`, `prompt_token_ids`, `chunks` (each chunk's generated
ids, in order), `content`, `finish_reason`, `usage`, `metrics` (vLLM's per-request timings
and speculative counts), `system_fingerprint`, `started` and `ended` (wall time, seconds)
and `counters` (the Prometheus counters before and after the request,
`Counters.to_dict()`); a turn the server did not finish has what arrived and its `error`."""


class ConversationError(VllmError):
    """A chat request failed: the server refused it."""


def chat_request(sampling: Sampling, messages: Messages) -> dict[str, Any]:
    """The streamed chat request for `messages`."""
    return {
        "model": SERVED_NAME, "messages": messages, "max_tokens": sampling.max_tokens,
        "temperature": sampling.temperature, "top_p": sampling.top_p, "seed": sampling.seed,
        "presence_penalty": 0.0, "frequency_penalty": 0.0, "stream": True,
        "stream_options": {"include_usage": True},
        "extra_body": {"top_k": sampling.top_k, "min_p": 0.0, "repetition_penalty": 1.0,
                       "return_token_ids": True},
    }


def new_record(question: str) -> ExchangeRecord:
    """An exchange record before its answer."""
    return {"question": question, "prompt_token_ids": None, "chunks": [], "content": "",
            "finish_reason": None, "usage": None, "metrics": None, "system_fingerprint": None}


def read_stream(chunks: Any, record: ExchangeRecord) -> None:
    """Fill `record` from a streamed answer's chunks as the client yields them (what
    arrived stays in it if the stream breaks)."""
    for chunk in chunks:
        doc = chunk.model_dump()
        if doc.get("prompt_token_ids") is not None:
            record["prompt_token_ids"] = list(doc["prompt_token_ids"])
        for choice in doc.get("choices") or []:
            record["content"] += (choice.get("delta") or {}).get("content") or ""
            if choice.get("token_ids"):
                record["chunks"].append(list(choice["token_ids"]))
            if choice.get("finish_reason") is not None:
                record["finish_reason"] = choice["finish_reason"]
        for key in ("usage", "metrics", "system_fingerprint"):
            if doc.get(key) is not None:
                record[key] = doc[key]


def ask(client: Any, scrape: Callable[[], str], sampling: Sampling, messages: Messages,
        record: ExchangeRecord) -> None:
    """One streamed chat completion with the counters around it, into `record`."""
    import openai

    before = parse_counters(scrape())
    record["started"] = time.time()
    try:
        read_stream(client.chat.completions.create(**chat_request(sampling, messages)), record)
    except openai.APIConnectionError as exc:
        raise ServerDiedError(f"vLLM's server stopped answering the chat request: "
                              f"{exc}".splitlines()[0]) from None
    except openai.APIError as exc:
        raise ConversationError(f"vLLM's chat request failed: {type(exc).__name__}: "
                                f"{exc}".splitlines()[0]) from None
    record["ended"] = time.time()
    after = parse_counters(scrape())
    record["counters"] = {"before": before.to_dict(), "after": after.to_dict()}


@dataclass
class Conversation:
    """The exchanges so far, and the error that ended the conversation early (None: it
    ran to the end)."""

    exchanges: list[ExchangeRecord]
    error: VllmError | None = None


def converse(client: Any, scrape: Callable[[], str], questions: Sequence[str],
             sampling: Sampling, on_answer: Callable[[ExchangeRecord], None] | None = None
             ) -> Conversation:
    """Ask `questions` one after another in one conversation (`scrape` reads /metrics);
    `on_answer` sees each exchange as it completes. A server that dies or refuses ends the
    conversation: the exchanges before it are kept, with the error, and so is what the
    interrupted one received (marked with its `error`)."""
    messages: Messages = []
    done = Conversation([])
    for question in questions:
        messages.append({"role": "user", "content": question})
        record = new_record(question)
        try:
            ask(client, scrape, sampling, messages, record)
        except VllmError as exc:
            done.error = exc
            if record["prompt_token_ids"] is not None or record["chunks"]:
                done.exchanges.append(record | {"error": str(exc)})
            return done
        messages.append({"role": "assistant", "content": record["content"]})
        done.exchanges.append(record)
        if on_answer is not None:
            on_answer(record)
    return done
