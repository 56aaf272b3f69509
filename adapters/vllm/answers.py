"""vLLM's answers as recorded by the conversation (adapters/vllm/conversation.py), read back:
what vLLM itself reported of each request. Nothing here is computed from anything else;
a figure the record lacks is None.

Per request vLLM gives: the prompt's ids and each streamed chunk's generated ids, the
finish reason, `usage` (prompt and completion tokens), its per-request `metrics`
(time to first token, decode time, and with a speculative method `speculative_decoding`:
verify steps, drafted and accepted tokens, the histogram of accepted drafts per step, and
at `detailed` the per-step drafted and accepted counts in order), and, from the
Prometheus scrapes around the request, its counters (adapters/vllm/metrics.py).
"""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.protocol import read_answers_file
from adapters.vllm.errors import VllmError
from adapters.vllm.metrics import Counters


class AnswersError(VllmError):
    """An answers file cannot be read or is not what the conversation writes."""


@dataclass(frozen=True)
class SpecReport:
    """vLLM's per-request speculative metrics (`metrics.speculative_decoding`)."""

    k: int
    steps: int
    drafted: int
    accepted: int
    histogram: tuple[int, ...]
    mean_acceptance_length: float
    acceptance_rate: float
    per_step_drafted: tuple[int, ...] | None
    per_step_accepted: tuple[int, ...] | None

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> "SpecReport":
        """Read vLLM's object."""
        steps_d, steps_a = doc.get("per_step_drafted"), doc.get("per_step_accepted")
        return cls(int(doc["num_spec_tokens"]), int(doc["num_spec_steps"]),
                   int(doc["num_draft_tokens"]), int(doc["num_accepted_draft_tokens"]),
                   tuple(int(x) for x in doc["acceptance_histogram"]),
                   float(doc["mean_acceptance_length"]), float(doc["draft_acceptance_rate"]),
                   tuple(int(x) for x in steps_d) if steps_d is not None else None,
                   tuple(int(x) for x in steps_a) if steps_a is not None else None)


@dataclass(frozen=True)
class Answer:
    """One request as vLLM reported it (`index`: its turn, from 0)."""

    index: int
    question: str
    prompt_ids: list[int] | None
    chunks: list[list[int]]
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    ttft_s: float | None
    decode_s: float | None
    spec: SpecReport | None
    counters: Counters | None
    fingerprint: str | None
    error: str | None = None
    """Why the server did not finish this answer (None: it did)."""

    @property
    def tokens(self) -> list[int]:
        """The generated ids, in order."""
        return [t for chunk in self.chunks for t in chunk]

    @classmethod
    def from_record(cls, index: int, rec: dict[str, Any]) -> "Answer":
        """Read one exchange record."""
        usage = rec.get("usage") or {}
        metrics = rec.get("metrics") or {}
        spec = metrics.get("speculative_decoding")
        counters = rec.get("counters")
        ttft, decode = metrics.get("time_to_first_token_ms"), metrics.get("generation_time_ms")
        delta = (Counters.from_dict(counters["after"]) - Counters.from_dict(counters["before"])
                 if counters else None)
        prompt = rec.get("prompt_token_ids")
        return cls(index, str(rec.get("question", "")),
                   [int(t) for t in prompt] if prompt is not None else None,
                   [[int(t) for t in c] for c in rec.get("chunks") or []],
                   rec.get("finish_reason"), usage.get("prompt_tokens"),
                   usage.get("completion_tokens"),
                   ttft / 1e3 if ttft is not None else None,
                   decode / 1e3 if decode is not None else None,
                   SpecReport.from_dict(spec) if spec else None, delta,
                   rec.get("system_fingerprint"), rec.get("error"))


@dataclass(frozen=True)
class Answers:
    """The answers of a file and its digest."""

    answers: list[Answer]
    sha256: str


def parse_answers(text: str, name: str = "answers") -> Answers:
    """The answers in `text`: the JSON array of exchange records a run writes."""
    try:
        doc = json.loads(text)
        if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
            raise AnswersError(f"{name} is not a JSON array of vLLM exchange records")
        answers = [Answer.from_record(i, r) for i, r in enumerate(doc)]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise AnswersError(f"{name} holds no vLLM exchange records ({type(exc).__name__}: "
                           f"{exc})".splitlines()[0]) from None
    return Answers(answers, hashlib.sha256(text.encode()).hexdigest())


def read_answers(path: str | Path) -> Answers:
    """The answers in the file at `path`."""
    return parse_answers(read_answers_file(path, AnswersError), str(Path(path)))
