"""A small JSON client of one llama-server on the loopback: tokenize / detokenize, the
chat template, and greedy completions over token ids, on one kept-alive connection.

Completions go through the raw `/completion` endpoint with a token-id prompt and
`return_tokens`, so a comparison with our engine is over ids, never re-tokenized text;
`cache_prompt` is off so every request is prefilled from scratch, as ours are, and the
sampler chain is the temperature sampler alone at 0: the argmax, with no repetition
penalty or top-k/p cut (llama.cpp's defaults) in the way.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters.llama.errors import ServerRequestError
from adapters.process import Connection

# tokenize_mixed passes numbers through untouched: one between texts splits the answer.
_SEPARATOR = -1


@dataclass(frozen=True)
class Completion:
    """One greedy completion: the generated ids and the server's own timings
    (`timings` of the response: decode tokens/s over the predicted tokens, drafts); with
    `n_probs`, per position the top candidates as (id, log-probability), best first."""

    tokens: list[int]
    stop_type: str
    prompt_n: int
    prompt_ms: float
    predicted_n: int
    predicted_ms: float
    predicted_per_second: float
    draft_n: int
    draft_accepted: int
    top: list[list[tuple[int, float]]] = field(default_factory=list)

    def gap(self, i: int) -> float | None:
        """The log-probability gap between the best and the second candidate at position
        `i` (None when the server gave fewer than two)."""
        cands = self.top[i] if i < len(self.top) else []
        return cands[0][1] - cands[1][1] if len(cands) > 1 else None

    @property
    def acceptance(self) -> float:
        """Accepted over drafted tokens (0 when nothing was drafted)."""
        return self.draft_accepted / self.draft_n if self.draft_n else 0.0

    @classmethod
    def from_response(cls, doc: dict[str, Any]) -> "Completion":
        """Read `/completion`'s JSON answer."""
        t = doc.get("timings", {})
        top = [sorted(((int(c["id"]), float(c["logprob"])) for c in p.get("top_logprobs", [])),
                      key=lambda c: (-c[1], c[0]))
               for p in doc.get("completion_probabilities") or []]
        return cls(tokens=list(doc.get("tokens", [])), stop_type=str(doc.get("stop_type", "")),
                   prompt_n=int(t.get("prompt_n", 0)), prompt_ms=float(t.get("prompt_ms", 0.0)),
                   predicted_n=int(t.get("predicted_n", 0)),
                   predicted_ms=float(t.get("predicted_ms", 0.0)),
                   predicted_per_second=float(t.get("predicted_per_second", 0.0)),
                   draft_n=int(t.get("draft_n", 0)),
                   draft_accepted=int(t.get("draft_n_accepted", 0)), top=top)


class LlamaClient(Connection):
    """Requests to the server at 127.0.0.1:`port`. `lost` is called when the connection
    fails and returns the error to raise (the server handle says whether its process
    died, and why)."""

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Status and decoded JSON (None when the body is empty) of one request."""
        status, raw = self.request_raw(method, path, body)
        return status, (json.loads(raw) if raw else None)

    def post(self, path: str, body: Any) -> Any:
        """POST `body`; the JSON answer, or ServerRequestError with the server's message."""
        status, doc = self.request("POST", path, body)
        if status != 200:
            message = doc.get("error", {}).get("message", doc) if isinstance(doc, dict) else doc
            raise ServerRequestError(f"llama-server: POST {path} answered {status}: {message}")
        return doc

    def metrics(self) -> str:
        """The Prometheus text of `/metrics` (a server started with `metrics`)."""
        status, raw = self.request_raw("GET", "/metrics")
        if status != 200:
            raise ServerRequestError(f"llama-server: GET /metrics answered {status}: start it "
                                     "with --metrics")
        return raw.decode(errors="replace")

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text, specials parsed, no BOS: one request for all."""
        content: list[str | int] = [x for text in texts for x in (text, _SEPARATOR)]
        ids: list[int] = self.post("/tokenize", {"content": content, "add_special": False,
                                                 "parse_special": True})["tokens"]
        out: list[list[int]] = [[]]
        for token in ids:
            if token == _SEPARATOR:
                out.append([])
            else:
                out[-1].append(token)
        return out[:len(texts)]

    def detokenize(self, ids: Sequence[int]) -> str:
        """The text of `ids`, specials spelled out."""
        return str(self.post("/detokenize", {"tokens": list(ids)})["content"])

    def apply_template(self, messages: Sequence[dict[str, str]]) -> str:
        """The prompt the server's chat template builds for `messages` (with the
        generation header)."""
        return str(self.post("/apply-template", {"messages": list(messages)})["prompt"])

    def complete(self, prompt: Sequence[int], n_predict: int, n_probs: int = 0,
                 cache_prompt: bool = False) -> Completion:
        """The greedy continuation of the token ids `prompt`: at most `n_predict` tokens,
        ending after an end-of-generation token; with the `n_probs` likeliest ids and their
        log-probabilities (before sampling) at every generated position. `cache_prompt`:
        the slot keeps what it already holds of the prompt and processes only the rest (a
        conversation's next turn), else the whole prompt is processed again."""
        body = {"prompt": list(prompt), "n_predict": n_predict, "temperature": 0.0,
                "samplers": ["temperature"], "cache_prompt": cache_prompt,
                "return_tokens": True,
                "stream": False}
        if n_probs:
            body["n_probs"] = n_probs
        return Completion.from_response(self.post("/completion", body))
