"""The fields of SGLang's batch lines, as a table: each `key: value` the scheduler prints,
the `Batch` attribute it fills and how its text reads. The scheduler joins its fields with
`, ` (the v0.4-0.5.2 lines end in a trailing `, `), so a line is a list of pairs; a key the
table does not hold is kept as printed in `Batch.other`, so a new field is visible, never
lost."""

from collections.abc import Callable
from dataclasses import dataclass

from adapters.sglang.log.records import Batch, BatchKind


def _flag(text: str) -> bool:
    if text not in ("True", "False"):
        raise ValueError(text)
    return text == "True"


def _percent(text: str) -> float:
    return float(text.removesuffix("%"))


@dataclass(frozen=True)
class Field:
    """One printed key: the attribute it fills and how its value reads."""

    attr: str
    read: Callable[[str], object]


FIELDS: dict[str, Field] = {
    "#running-req": Field("running_req", int),
    "#queue-req": Field("queue_req", int),
    "#token": Field("token", int),
    "token usage": Field("token_usage", float),
    "#full token": Field("full_token", int),
    "full token usage": Field("full_token_usage", float),
    "#swa token": Field("swa_token", int),
    "swa token usage": Field("swa_token_usage", float),
    "mamba num": Field("mamba_num", int),
    "mamba usage": Field("mamba_usage", float),
    "accept len": Field("accept_len", float),
    "accept rate": Field("accept_rate", float),
    "cuda graph": Field("graph", _flag),
    "npu graph": Field("graph", _flag),
    "gen throughput (token/s)": Field("gen_throughput", float),
    "#new-seq": Field("new_seq", int),
    "#new-token": Field("new_token", int),
    "#cached-token": Field("cached_token", int),
    "cache hit rate": Field("cache_hit_rate", _percent),
    "#pending-token": Field("pending_token", int),
    "input throughput (token/s)": Field("input_throughput", float),
}
"""Every batch-line key this reader reads (SGLang 0.4 through the 2026 hybrid lines)."""

_GRAPH_KEYS = {"cuda graph": "cuda", "npu graph": "npu"}


def pairs(text: str) -> list[tuple[str, str]]:
    """The `key: value` pairs of a batch line's fields (`text` after `Decode batch, `); a
    piece without `: ` is kept with an empty value."""
    out = []
    for piece in text.split(","):
        piece = piece.strip()
        if piece:
            key, _, value = piece.partition(": ")
            out.append((key.strip(), value.strip()))
    return out


def read_batch(kind: BatchKind, text: str, line: int, clock: str | None,
               rank: str | None) -> Batch:
    """The batch record of one line's fields; a value that does not read as its key's type
    goes to `other` as printed, its attribute left None."""
    batch = Batch(kind, line, clock, rank)
    for key, value in pairs(text):
        spec = FIELDS.get(key)
        if spec is None:
            batch.other[key] = value
            continue
        try:
            setattr(batch, spec.attr, spec.read(value))
        except ValueError:
            batch.other[key] = value
            continue
        if key in _GRAPH_KEYS:
            batch.graph_device = _GRAPH_KEYS[key]
    return batch
