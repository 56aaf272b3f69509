"""vLLM's Prometheus counters (`/metrics`), read before and after each request: the
server answers one conversation at a time here, so the difference of two scrapes is that
request's share. Pure functions: parsing, differences, and the checks of vLLM's counters
against each other.

The counters (vLLM 0.32, `vllm/v1/metrics/loggers.py`):
- `vllm:spec_decode_num_drafts_total`: verify steps that had drafts;
- `vllm:spec_decode_num_draft_tokens_total`: drafted tokens;
- `vllm:spec_decode_num_accepted_tokens_total`: accepted drafts;
- `vllm:spec_decode_num_accepted_tokens_per_pos_total{position=i}`: steps that accepted
  the draft at position i (and so every draft before it);
- `vllm:prompt_tokens_total`, `vllm:generation_tokens_total`;
- `vllm:prefix_cache_queries_total`, `vllm:prefix_cache_hits_total` (tokens looked up in
  and found in the prefix cache) and `vllm:prompt_tokens_cached_total`.
"""

import re
from dataclasses import dataclass, fields
from typing import Any

from adapters.vllm.errors import MetricsFormatError

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
_COUNTERS = {
    "prompt_tokens": "vllm:prompt_tokens_total",
    "generation_tokens": "vllm:generation_tokens_total",
    "prefix_queries": "vllm:prefix_cache_queries_total",
    "prefix_hits": "vllm:prefix_cache_hits_total",
    "cached_prompt_tokens": "vllm:prompt_tokens_cached_total",
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
}
"""Our name -> the Prometheus counter, summed over its label sets."""

Samples = dict[str, list[tuple[dict[str, str], float]]]


def parse_samples(text: str) -> Samples:
    """Every sample of a Prometheus text page, by metric name: (labels, value)."""
    out: Samples = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            raise MetricsFormatError(f"vLLM's /metrics line {n} is not a Prometheus sample: "
                                     f"{line[:80]!r}")
        try:
            value = float(m.group(4))
        except ValueError:
            raise MetricsFormatError(f"vLLM's /metrics line {n} has no number: "
                                     f"{line[:80]!r}") from None
        labels = dict(_LABEL.findall(m.group(3) or ""))
        out.setdefault(m.group(1), []).append((labels, value))
    return out


def _count(value: float, name: str) -> int:
    if value < 0 or not value.is_integer():
        raise MetricsFormatError(f"vLLM's counter {name} is {value}, not a count")
    return int(value)


@dataclass(frozen=True)
class Counters:
    """vLLM's counters at one scrape (or the difference of two). A speculative counter is
    None when the server has no speculative method (vLLM then exports none); `per_pos[i]`
    is the steps that accepted the draft at position i."""

    prompt_tokens: int
    generation_tokens: int
    prefix_queries: int
    prefix_hits: int
    cached_prompt_tokens: int
    drafts: int | None
    draft_tokens: int | None
    accepted: int | None
    per_pos: tuple[int, ...] | None

    def __sub__(self, before: "Counters") -> "Counters":
        """What happened between the scrape `before` and this one."""
        def minus(a: int | None, b: int | None) -> int | None:
            return a - b if a is not None and b is not None else None

        per_pos = (tuple(a - b for a, b in zip(self.per_pos, before.per_pos, strict=True))
                   if self.per_pos is not None and before.per_pos is not None else None)
        scalars = {f.name: minus(getattr(self, f.name), getattr(before, f.name))
                   for f in fields(self) if f.name != "per_pos"}
        return Counters(**scalars, per_pos=per_pos)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, object]:
        """JSON form."""
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                for f in fields(self)}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> "Counters":
        """Inverse of `to_dict`."""
        per_pos = doc.get("per_pos")
        return cls(**{f.name: doc.get(f.name) for f in fields(cls) if f.name != "per_pos"},
                   per_pos=tuple(per_pos) if per_pos is not None else None)


def parse_counters(text: str) -> Counters:
    """The counters of one `/metrics` page."""
    samples = parse_samples(text)

    def total(name: str) -> int | None:
        found = samples.get(name)
        return _count(sum(v for _, v in found), name) if found else None

    values = {ours: total(name) for ours, name in _COUNTERS.items()}
    positions = samples.get(PER_POS)
    per_pos: tuple[int, ...] | None = None
    if positions:
        by_pos: dict[int, float] = {}
        for labels, v in positions:
            if "position" not in labels or not labels["position"].isdigit():
                raise MetricsFormatError(f"vLLM's {PER_POS} has a sample without a position")
            pos = int(labels["position"])
            by_pos[pos] = by_pos.get(pos, 0.0) + v
        if sorted(by_pos) != list(range(len(by_pos))):
            raise MetricsFormatError(f"vLLM's {PER_POS} positions are not 0..n-1: "
                                     f"{sorted(by_pos)}")
        per_pos = tuple(_count(by_pos[i], PER_POS) for i in range(len(by_pos)))
    required = ("prompt_tokens", "generation_tokens", "prefix_queries", "prefix_hits",
                "cached_prompt_tokens")
    missing = [_COUNTERS[k] for k in required if values[k] is None]
    if missing:
        raise MetricsFormatError(f"vLLM's /metrics has no {missing[0]}: is this a vLLM 0.32 "
                                 "server with its stats on?")
    return Counters(**values, per_pos=per_pos)  # type: ignore[arg-type]
