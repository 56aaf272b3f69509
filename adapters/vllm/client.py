"""A small JSON client of one vLLM server on the loopback, on one kept-alive connection:
health, version, the Prometheus metrics page, and greedy completions over token ids with
the top logprobs of every generated position (what a comparison of engines needs).

Completions go through `/v1/completions` with a token-id prompt, so nothing is tokenized
again; `return_tokens_as_token_ids` makes vLLM name each logprob's token by id
(`token_id:N`), never by a text that several byte tokens can share. Temperature 0 is
vLLM's greedy sampling: the argmax, with no penalty or top-k/p cut in the way. Stops are
the model's end-of-generation ids (its generation_config.json, which vLLM reads).
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapters.process import Connection
from adapters.vllm.errors import ServerRequestError
from adapters.vllm.options import SERVED_NAME

_TOKEN_ID = "token_id:"


@dataclass(frozen=True)
class Completion:
    """One greedy completion: the generated ids, per position the top candidates as
    (id, logprob), best first, why it stopped, and the prompt's length as vLLM saw it."""

    tokens: list[int]
    top: list[list[tuple[int, float]]]
    finish_reason: str
    prompt_tokens: int

    def gap(self, i: int) -> float | None:
        """The logprob gap between the best and the second candidate at position `i`
        (None when vLLM gave fewer than two)."""
        cands = self.top[i]
        return cands[0][1] - cands[1][1] if len(cands) > 1 else None


def _token_id(key: str) -> int:
    """The id of a logprob key `token_id:N`."""
    if not key.startswith(_TOKEN_ID):
        raise ServerRequestError(f"vLLM named a logprob's token {key!r}, not by id: the "
                                 "server ignored return_tokens_as_token_ids")
    return int(key[len(_TOKEN_ID):])


def parse_completion(doc: dict[str, Any]) -> Completion:
    """Read `/v1/completions`' answer (one choice, logprobs by token id)."""
    choice = doc["choices"][0]
    logprobs = choice.get("logprobs") or {}
    top = [sorted(((_token_id(k), float(v)) for k, v in (pos or {}).items()),
                  key=lambda c: (-c[1], c[0]))
           for pos in logprobs.get("top_logprobs") or []]
    tokens = [int(t) for t in choice.get("token_ids") or []]
    usage = doc.get("usage") or {}
    return Completion(tokens, top, str(choice.get("finish_reason")),
                      int(usage.get("prompt_tokens", 0)))


class VllmClient(Connection):
    """Requests to the server at 127.0.0.1:`port`. `lost` is called when a request fails
    for want of a server (no connection, or a server error: vLLM answers 500 when its
    engine core died, then shuts down) and returns the error to raise (the server handle
    says whether its process died, and why)."""

    def get_text(self, path: str) -> str:
        """GET `path`'s body as text, or ServerRequestError."""
        status, raw = self.request_raw("GET", path)
        if status != 200:
            raise ServerRequestError(f"vLLM: GET {path} answered {status}")
        return raw.decode(errors="replace")

    def post(self, path: str, body: Any) -> Any:
        """POST `body`; the JSON answer, or ServerRequestError with the server's message."""
        status, raw = self.request_raw("POST", path, body)
        if status == 200:
            return json.loads(raw)
        raise self.refusal(f"POST {path}", status, raw)

    def refusal(self, what: str, status: int, raw: bytes) -> Exception:
        """The error for a request the server answered with `status` (not 200)."""
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = raw.decode(errors="replace")
        message = doc.get("error", {}).get("message", doc) if isinstance(doc, dict) else doc
        first = str(message).strip().splitlines()[0] if message else ""
        said = f"{what} answered {status}: {first}"
        if status >= 500:
            return self._lost(said)
        return ServerRequestError(f"vLLM: {said}")

    def version(self) -> str:
        """vLLM's version, as the server reports it."""
        return str(json.loads(self.get_text("/version"))["version"])

    def metrics(self) -> str:
        """The Prometheus text of `/metrics`."""
        return self.get_text("/metrics")

    def complete(self, prompt: Sequence[int], max_tokens: int, top: int = 2) -> Completion:
        """The greedy continuation of the token ids `prompt`: at most `max_tokens` tokens,
        ending after an end-of-generation id, with the `top` likeliest ids and their
        logprobs at every generated position."""
        body = {"model": SERVED_NAME, "prompt": list(prompt), "max_tokens": max_tokens,
                "temperature": 0.0, "logprobs": top, "return_tokens_as_token_ids": True,
                "return_token_ids": True, "skip_special_tokens": False}
        return parse_completion(self.post("/v1/completions", body))

    def complete_all(self, prompts: Sequence[Sequence[int]], max_tokens: int, top: int = 2
                     ) -> list[Completion]:
        """`complete` for each prompt, one after another (one sequence at a time, as the
        other engines answer them)."""
        return [self.complete(p, max_tokens, top) for p in prompts]
