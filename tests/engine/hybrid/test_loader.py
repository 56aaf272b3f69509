"""Loading checkpoints: layouts we accept, and the errors for everything else."""

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

from engine.hybrid import (
    CheckpointFormatError,
    CheckpointNotFoundError,
    HybridConfig,
    HybridConfigError,
    load_checkpoint,
)
from fsm.errors import SpecledgerError
from tests.engine.hybrid.conftest import Pair


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _config(path: Path) -> dict[str, Any]:
    return json.loads((path / "config.json").read_text())


def test_missing_directory_and_files_are_specific_errors(tmp_path: Path,
                                                         pair: Callable[[str], Pair]) -> None:
    with pytest.raises(CheckpointNotFoundError, match="never downloaded"):
        load_checkpoint(tmp_path / "absent")
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    with pytest.raises(CheckpointNotFoundError, match="is a file, not a checkpoint directory"):
        load_checkpoint(tmp_path / "model.gguf")
    (tmp_path / "model.gguf").unlink()
    with pytest.raises(CheckpointNotFoundError, match=r"config\.json"):
        load_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text((pair("gqa_tied_k4").path / "config.json").read_text())
    with pytest.raises(CheckpointNotFoundError, match="safetensors"):
        load_checkpoint(tmp_path)
    assert issubclass(CheckpointNotFoundError, SpecledgerError)


def test_missing_or_misshapen_tensors_are_format_errors(tmp_path: Path,
                                                        pair: Callable[[str], Pair]) -> None:
    path = _copy(pair("gqa_tied_k4").path, tmp_path / "ck")
    weights = load_file(path / "model.safetensors")
    norm = weights.pop("model.norm.weight")
    save_file(weights, path / "model.safetensors")
    with pytest.raises(CheckpointFormatError, match=r"norm\.weight"):
        load_checkpoint(path)
    save_file({**weights, "model.norm.weight": torch.cat((norm, norm))},
              path / "model.safetensors")
    with pytest.raises(CheckpointFormatError, match="shape"):
        load_checkpoint(path)
    save_file({**weights, "model.norm.weight": norm, "model.extra.weight": norm.clone()},
              path / "model.safetensors")
    with pytest.raises(CheckpointFormatError, match="extra"):
        load_checkpoint(path)
    (path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointFormatError, match="readable"):
        load_checkpoint(path)


def test_multimodal_layout_loads_the_same_decoder(tmp_path: Path,
                                                  pair: Callable[[str], Pair]) -> None:
    # Qwen3_5ForConditionalGeneration: nested text_config, `model.language_model.` names,
    # and vision / MTP tensors that are not ours; split over two shards.
    p = pair("mha_untied_k2")
    path = tmp_path / "mm"
    path.mkdir()
    text = _config(p.path)
    (path / "config.json").write_text(json.dumps(
        {"model_type": "qwen3_5", "text_config": text,
         "tie_word_embeddings": text["tie_word_embeddings"]}))
    weights = load_file(p.path / "model.safetensors")
    renamed = {k.replace("model.", "model.language_model.", 1): v for k, v in weights.items()}
    names = sorted(renamed)
    extra = {"model.visual.proj.weight": torch.ones(2), "mtp.fc.weight": torch.ones(2)}
    save_file({k: renamed[k] for k in names[:10]} | extra, path / "a.safetensors")
    save_file({k: renamed[k] for k in names[10:]}, path / "b.safetensors")
    ids = torch.randint(0, 300, (1, 9))
    torch.testing.assert_close(load_checkpoint(path).model(ids), p.model(ids), rtol=0, atol=0)


def test_tokenizer_and_generation_eos_are_picked_up(tmp_path: Path,
                                                    pair: Callable[[str], Pair]) -> None:
    path = _copy(pair("gqa_tied_k4").path, tmp_path / "ck")
    assert load_checkpoint(path).tokenizer is None
    Tokenizer(WordLevel({"hi": 0, "[UNK]": 1}, unk_token="[UNK]")).save(
        str(path / "tokenizer.json"))
    (path / "generation_config.json").write_text(json.dumps({"eos_token_id": [5, 7]}))
    loaded = load_checkpoint(path)
    assert loaded.tokenizer is not None and loaded.tokenizer.token_to_id("hi") == 0
    assert loaded.config.eos_token_ids == (5, 7)
    (path / "tokenizer.json").write_text("not json")
    with pytest.raises(CheckpointFormatError, match="tokenizer"):
        load_checkpoint(path)


@pytest.mark.parametrize(("change", "message"), [
    ({"layer_types": ["linear_attention"]}, "layer_types has 1"),
    ({"layer_types": ["linear_attention"] * 3 + ["sliding"]}, "unsupported layer type"),
    ({"num_key_value_heads": 3}, "multiple of num_key_value_heads"),
    ({"linear_num_key_heads": 3}, "multiple of linear_num_key_heads"),
    ({"head_dim": None}, "lacks required field"),
    ({"hidden_size": "64"}, "positive integer"),
    ({"linear_conv_kernel_dim": 1}, "at least 2"),
    ({"model_type": "qwen3_5_moe"}, "not a Qwen3.5 dense hybrid"),
    ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0}}, "rope_type 'yarn'"),
    ({"rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 1.5}}, "partial_rotary"),
])
def test_config_errors_name_the_problem(pair: Callable[[str], Pair], change: dict[str, Any],
                                        message: str) -> None:
    raw = {**_config(pair("gqa_tied_k4").path), **change}
    with pytest.raises(HybridConfigError, match=message):
        HybridConfig.from_dict(raw)


def test_config_defaults_follow_transformers() -> None:
    raw = {"vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
           "num_hidden_layers": 8, "num_attention_heads": 2, "num_key_value_heads": 1,
           "head_dim": 8, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 4,
           "linear_value_head_dim": 4, "linear_num_key_heads": 1, "linear_num_value_heads": 2,
           "eos_token_id": 3}
    config = HybridConfig.from_dict(raw)
    assert config.layer_types == (("linear_attention",) * 3 + ("full_attention",)) * 2
    assert config.rotary_dim == 2 and config.eos_token_ids == (3,)
    with pytest.raises(CheckpointNotFoundError):
        HybridConfig.from_file("/nonexistent/config.json")
