"""`HybridConfig`: the Qwen3.5 text architecture's hyper-parameters, read from a HF
config.json (either the text config itself or a composite one with `text_config`) and
validated once, so the model code can trust every field."""

import json
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from engine.hybrid.errors import CheckpointNotFoundError, HybridConfigError

LINEAR = "linear_attention"
FULL = "full_attention"
SUPPORTED_MODEL_TYPES = frozenset({"qwen3_5", "qwen3_5_text"})
# mrope fields only matter for vision positions; with text positions every rotary section
# sees the same position, which is plain RoPE.
SUPPORTED_ROPE_TYPES = frozenset({"default"})



@dataclass(frozen=True)
class HybridConfig:
    """Hyper-parameters of a Qwen3.5-style hybrid (Gated DeltaNet + gated attention) LM."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    linear_conv_kernel_dim: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    layer_types: tuple[str, ...]
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    partial_rotary_factor: float = 0.25
    attention_bias: bool = False
    tie_word_embeddings: bool = False
    eos_token_ids: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        self._validate()

    @property
    def rotary_dim(self) -> int:
        """Leading dims of each attention head that RoPE rotates (the rest pass through)."""
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def linear_key_dim(self) -> int:
        """Width of the GDN query (and key) projection, all heads."""
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def linear_value_dim(self) -> int:
        """Width of the GDN value projection, all heads."""
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the GDN depthwise conv: q, k and v side by side."""
        return 2 * self.linear_key_dim + self.linear_value_dim

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "HybridConfig":
        """Build from a parsed config.json: the text config, or a composite one whose
        `text_config` holds it (top-level tying and EOS ids apply to it)."""
        text = _text_section(raw)
        missing = [key for key in REQUIRED if text.get(key) is None]
        if missing:
            raise HybridConfigError(f"config.json lacks required field(s): {', '.join(missing)}")
        num_layers = text["num_hidden_layers"]
        layer_types = text.get("layer_types") or _interval_layer_types(text, num_layers)
        rope = _rope_parameters(text)
        eos = text.get("eos_token_id")
        return cls(
            **{key: text[key] for key in REQUIRED},
            layer_types=tuple(layer_types),
            rms_norm_eps=float(text.get("rms_norm_eps", 1e-6)),
            rope_theta=float(rope["rope_theta"]),
            partial_rotary_factor=float(rope["partial_rotary_factor"]),
            attention_bias=bool(text.get("attention_bias", False)),
            tie_word_embeddings=bool(text.get("tie_word_embeddings", False)),
            eos_token_ids=tuple(eos if isinstance(eos, list) else [] if eos is None else [eos]),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> "HybridConfig":
        """Read and validate a config.json file."""
        path = Path(path)
        if not path.is_file():
            raise CheckpointNotFoundError(
                f"no config.json at {path}: point --model at a HF checkpoint directory"
            )
        try:
            raw = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise HybridConfigError(f"{path} is not valid JSON: {err}") from err
        return cls.from_dict(raw)

    def _validate(self) -> None:
        for name in REQUIRED:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise HybridConfigError(f"{name} must be a positive integer, got {value!r}")
        if len(self.layer_types) != self.num_hidden_layers:
            raise HybridConfigError(
                f"layer_types has {len(self.layer_types)} entries but num_hidden_layers is "
                f"{self.num_hidden_layers}"
            )
        unknown = sorted(set(self.layer_types) - {LINEAR, FULL})
        if unknown:
            raise HybridConfigError(
                f"unsupported layer type(s) {unknown}: expected '{LINEAR}' or '{FULL}'"
            )
        _check_divides("num_key_value_heads", self.num_key_value_heads,
                       "num_attention_heads", self.num_attention_heads)
        _check_divides("linear_num_key_heads", self.linear_num_key_heads,
                       "linear_num_value_heads", self.linear_num_value_heads)
        if self.linear_conv_kernel_dim < 2:
            raise HybridConfigError("linear_conv_kernel_dim must be at least 2")
        if not 0.0 < self.partial_rotary_factor <= 1.0:
            raise HybridConfigError(
                f"partial_rotary_factor must be in (0, 1], got {self.partial_rotary_factor}"
            )
        if self.rotary_dim < 2 or self.rotary_dim % 2:
            raise HybridConfigError(
                f"head_dim * partial_rotary_factor = {self.rotary_dim} must be even and >= 2"
            )
        if self.rope_theta <= 0 or self.rms_norm_eps <= 0:
            raise HybridConfigError("rope_theta and rms_norm_eps must be positive")


# The fields config.json must give as positive integers: every one without a default but
# the layer types (which may follow from full_attention_interval).
REQUIRED = tuple(f.name for f in fields(HybridConfig)
                  if f.default is MISSING and f.name != "layer_types")


def _check_divides(small_name: str, small: int, big_name: str, big: int) -> None:
    if big % small:
        raise HybridConfigError(f"{big_name} ({big}) must be a multiple of {small_name} ({small})")


def _text_section(raw: dict[str, Any]) -> dict[str, Any]:
    model_type = raw.get("model_type")
    if model_type is not None and model_type not in SUPPORTED_MODEL_TYPES:
        raise HybridConfigError(
            f"model_type {model_type!r} is not a Qwen3.5 dense hybrid; supported: "
            f"{sorted(SUPPORTED_MODEL_TYPES)}"
        )
    nested = raw.get("text_config")
    if nested is None:
        return raw
    if not isinstance(nested, dict):
        raise HybridConfigError("text_config must be a JSON object")
    text = dict(nested)
    # The composite model owns the LM head, so its tying flag wins over the text config's.
    if "tie_word_embeddings" in raw:
        text["tie_word_embeddings"] = raw["tie_word_embeddings"]
    for key in ("eos_token_id", "bos_token_id"):
        if text.get(key) is None and raw.get(key) is not None:
            text[key] = raw[key]
    return text


def _interval_layer_types(text: dict[str, Any], num_layers: int) -> tuple[str, ...]:
    # HF's rule when layer_types is absent: every `full_attention_interval`-th layer is full.
    interval = text.get("full_attention_interval", 4)
    if not isinstance(interval, int) or interval <= 0:
        raise HybridConfigError(f"full_attention_interval must be a positive integer: {interval!r}")
    return hybrid_layers(num_layers, interval)


def hybrid_layers(n: int, interval: int = 4) -> tuple[str, ...]:
    """Qwen3.5's layout: every `interval`-th layer is full attention, the rest GDN."""
    return tuple(FULL if (i + 1) % interval == 0 else LINEAR for i in range(n))


def _rope_parameters(text: dict[str, Any]) -> dict[str, Any]:
    # transformers 5 nests these in rope_parameters; older configs keep them top-level.
    rope = dict(text.get("rope_parameters") or text.get("rope_scaling") or {})
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise HybridConfigError(
            f"rope_type {rope_type!r} is not supported; supported: {sorted(SUPPORTED_ROPE_TYPES)}"
        )
    rope.setdefault("rope_theta", text.get("rope_theta", 10000.0))
    rope.setdefault("partial_rotary_factor", text.get("partial_rotary_factor", 0.25))
    return rope
