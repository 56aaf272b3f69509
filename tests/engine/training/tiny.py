"""A tiny hybrid config for fast tests (not a test module)."""

from engine.hybrid.config import HybridConfig
from engine.hybrid.tokenizer import VOCAB_SIZE
from engine.training.configs import hybrid_layers


def tiny_config() -> HybridConfig:
    """Two GDN layers and one attention layer, 32 wide, the real vocabulary."""
    return HybridConfig(
        vocab_size=VOCAB_SIZE, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, linear_conv_kernel_dim=4,
        linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=1,
        linear_num_value_heads=2, layer_types=hybrid_layers(3, interval=3),
        partial_rotary_factor=0.5, tie_word_embeddings=True,
    )
