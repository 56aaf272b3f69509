"""The model families: the default pair is the one shipped as target/draft; the wide pair
has the head widths vLLM's CPU kernels accept and the same tokenizer."""

import json

import pytest

from engine.hybrid.config import HybridConfig
from engine.hybrid.tokenizer import VOCAB_SIZE
from engine.shipped import ROOT as SHIPPED_ROOT
from engine.training.configs import (
    WIDE_STEPS,
    ModelFamily,
    TrainConfig,
    draft_config,
    target_config,
    train_config,
)

SHIPPED = {ModelFamily.DEFAULT: ("target", "draft"), ModelFamily.WIDE: ("wide", "wide-draft")}


@pytest.mark.parametrize("family", list(ModelFamily))
def test_each_family_is_what_ships(family: ModelFamily) -> None:
    target, draft = SHIPPED[family]
    for name, config in ((target, target_config(family)), (draft, draft_config(family))):
        assert HybridConfig.from_file(SHIPPED_ROOT / name / "config.json") == config


@pytest.mark.parametrize("config", [target_config(ModelFamily.WIDE),
                                    draft_config(ModelFamily.WIDE)])
def test_wide_heads_are_the_widths_vllm_accepts(config: HybridConfig) -> None:
    # vLLM's CPU attention and GDN ops refuse heads of 32 ("Unexpected head dim size").
    assert config.head_dim == 64
    assert config.linear_key_head_dim == config.linear_value_head_dim == 128
    assert config.rotary_dim == target_config().rotary_dim == 16
    assert config.vocab_size == VOCAB_SIZE
    assert {"linear_attention", "full_attention"} <= set(config.layer_types)


def test_the_family_is_recorded_by_name() -> None:
    record = TrainConfig(family=ModelFamily.WIDE).to_dict()
    assert json.loads(json.dumps(record))["family"] == "wide"
    assert TrainConfig().family is ModelFamily.DEFAULT


def test_the_wide_phases_run_fixed_steps_the_default_ones_the_clock() -> None:
    default = train_config(seed=3, minutes=5.0)
    assert default == TrainConfig(seed=3, minutes=5.0)
    assert all(p.steps is None for p in (default.target, default.draft, default.mtp))
    wide = train_config(ModelFamily.WIDE, seed=3)
    assert {p.name: p.steps for p in (wide.target, wide.draft, wide.mtp)} == WIDE_STEPS
    assert wide.target.lr == default.target.lr and wide.seed == 3
