"""What an SGLang server says about itself at start-up: its `server_args=ServerArgs(…)` line
(every argument, read as Python literals where they are ones) and the few settings the
findings need, typed: the model, the speculative algorithm and its sizes, the parallel
layout, the radix cache and the Mamba settings of a hybrid model."""

import ast
from dataclasses import dataclass, field

_OPEN, _CLOSE = "([{", ")]}"


def split_top(text: str) -> list[str]:
    """`text` cut at the commas outside brackets and quotes (a `ServerArgs(…)` body holds
    nested configs and lists)."""
    parts, depth, quote, start = [], 0, "", 0
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def literal(text: str) -> object:
    """A value as Python reads it (a string, number, None, bool, list), else its text
    (a nested config's repr)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def read_args(body: str) -> dict[str, object]:
    """The arguments of a `ServerArgs(…)` repr (`body` from `ServerArgs(` on; a line cut
    short keeps the arguments before the cut)."""
    inner = body.removeprefix("ServerArgs(")
    if inner.endswith(")"):
        inner = inner[:-1]
    out: dict[str, object] = {}
    for part in split_top(inner):
        key, eq, value = part.partition("=")
        if eq and key.isidentifier():
            out[key] = literal(value)
    return out


def _get(args: dict[str, object], key: str, kind: type) -> object:
    """The argument `key` where it is of type `kind` (a bool is no int here), else None."""
    value = args.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        return None
    return value


# (ServerInfo attribute, ServerArgs argument, its type): the settings read off the line.
_TYPED: tuple[tuple[str, str, type], ...] = (
    ("model", "served_model_name", str),
    ("speculative_algorithm", "speculative_algorithm", str),
    ("draft_model", "speculative_draft_model_path", str),
    ("num_steps", "speculative_num_steps", int),
    ("eagle_topk", "speculative_eagle_topk", int),
    ("num_draft_tokens", "speculative_num_draft_tokens", int),
    ("tp_size", "tp_size", int),
    ("dp_size", "dp_size", int),
    ("disable_radix_cache", "disable_radix_cache", bool),
    ("mamba_radix_cache_strategy", "mamba_radix_cache_strategy", str),
    ("uses_mamba_radix_cache", "uses_mamba_radix_cache", bool),
    ("mamba_scheduler_strategy", "mamba_scheduler_strategy", str),
    ("max_running_requests", "max_running_requests", int),
    ("context_length", "context_length", int),
)


@dataclass
class ServerInfo:
    """One server run's settings as its start-up lines printed them (None: not printed,
    e.g. in a piece that starts after start-up). `hybrid` names the kind of hybrid model a
    line declared (`swa`, `ssm`/Mamba); `max_total_tokens` the KV pool's size in tokens."""

    model: str | None = None
    architecture: str | None = None
    speculative_algorithm: str | None = None
    draft_model: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    tp_size: int | None = None
    dp_size: int | None = None
    disable_radix_cache: bool | None = None
    mamba_radix_cache_strategy: str | None = None
    uses_mamba_radix_cache: bool | None = None
    mamba_scheduler_strategy: str | None = None
    max_total_tokens: int | None = None
    max_running_requests: int | None = None
    context_length: int | None = None
    hybrid: set[str] = field(default_factory=set)
    args: dict[str, object] = field(default_factory=dict)

    def take_args(self, args: dict[str, object]) -> None:
        """Fill the typed settings from a `ServerArgs` line's arguments."""
        self.args = args
        for attr, key, kind in _TYPED:
            setattr(self, attr, _get(args, key, kind))
        self.model = self.model or _get(args, "model_path", str)  # type: ignore[assignment]
