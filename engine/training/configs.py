"""What gets trained and how: the shipped models' architectures, the optimiser settings
of each phase, and how a time budget is shared between the phases."""

from dataclasses import asdict, dataclass, field
from typing import Any

from engine.hybrid.config import FULL, LINEAR, HybridConfig
from engine.hybrid.tokenizer import END_OF_TEXT, IM_END, VOCAB_SIZE

EOS_TOKEN_IDS = (IM_END, END_OF_TEXT)


def hybrid_layers(n: int, interval: int = 4) -> tuple[str, ...]:
    """Qwen3.5's layout: every `interval`-th layer is full attention, the rest GDN."""
    return tuple(FULL if (i + 1) % interval == 0 else LINEAR for i in range(n))


def _config(hidden: int, intermediate: int, layers: tuple[str, ...], heads: int, kv_heads: int,
            k_heads: int, v_heads: int, head_dim: int) -> HybridConfig:
    return HybridConfig(
        vocab_size=VOCAB_SIZE, hidden_size=hidden, intermediate_size=intermediate,
        num_hidden_layers=len(layers), num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=head_dim, linear_conv_kernel_dim=4, linear_key_head_dim=head_dim,
        linear_value_head_dim=head_dim, linear_num_key_heads=k_heads,
        linear_num_value_heads=v_heads, layer_types=layers,
        # Tiny heads: rotate half of each (Qwen3.5 rotates a quarter of 256-wide heads).
        partial_rotary_factor=0.5, tie_word_embeddings=True, eos_token_ids=EOS_TOKEN_IDS,
    )


def target_config() -> HybridConfig:
    """The target: 8 layers (GDN x3 + attention, twice), ~1.7M parameters."""
    return _config(hidden=128, intermediate=384, layers=hybrid_layers(8), heads=4, kv_heads=2,
                   k_heads=2, v_heads=4, head_dim=32)


def draft_config() -> HybridConfig:
    """The draft: 3 layers (GDN, GDN, attention), about 8x fewer parameters."""
    return _config(hidden=72, intermediate=216, layers=hybrid_layers(3, interval=3), heads=2,
                   kv_heads=1, k_heads=1, v_heads=2, head_dim=36)


@dataclass(frozen=True)
class PhaseConfig:
    """Optimiser and batch settings of one training phase. The cosine schedule runs over
    `steps` when given, else over the phase's share of the wall-clock budget."""

    name: str
    share: float            # fraction of the budget this phase may use
    batch_size: int = 4
    seq_len: int = 1024
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup: float = 0.03    # fraction of the schedule spent warming up
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    prompt_weight: float = 0.25  # loss weight of non-answer tokens (answers weigh 1)
    steps: int | None = None


@dataclass(frozen=True)
class TrainConfig:
    """The whole training run."""

    seed: int = 0
    minutes: float = 30.0
    threads: int = 2
    # The target is the one whose quality is promised, so it gets most of the time.
    target: PhaseConfig = field(default_factory=lambda: PhaseConfig("target", share=0.7))
    draft: PhaseConfig = field(default_factory=lambda: PhaseConfig("draft", share=0.12,
                                                                   lr=4e-3))
    mtp: PhaseConfig = field(default_factory=lambda: PhaseConfig("mtp", share=0.13))
    max_files: int | None = None  # None: the whole stdlib

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (recorded next to the weights)."""
        return asdict(self)
