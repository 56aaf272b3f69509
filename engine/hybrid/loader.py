"""Load a HF-format Qwen3.5 checkpoint directory (config.json, *.safetensors, optional
tokenizer.json) from a local path. Nothing is ever downloaded."""

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from tokenizers import Tokenizer
from torch import Tensor

from engine.hybrid.config import HybridConfig
from engine.hybrid.errors import CheckpointFormatError, CheckpointNotFoundError
from engine.hybrid.model import HybridModel
from engine.shipped import model_dir

# Qwen3_5ForCausalLM saves `model.*`; the multimodal Qwen3_5ForConditionalGeneration saves
# the text decoder under `model.language_model.*`.
_PREFIXES = ("model.language_model.", "model.")
# Vision tower and multi-token-prediction head: not part of the text decoder.
_IGNORED = ("mtp.", "model.visual.", "visual.")


@dataclass(frozen=True)
class LoadedCheckpoint:
    """A ready model with its config, and its tokenizer when the directory has one."""

    path: Path
    config: HybridConfig
    model: HybridModel
    tokenizer: Tokenizer | None


def load_checkpoint(
    path: str | Path, *, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
) -> LoadedCheckpoint:
    """Load the checkpoint directory at `path` in `dtype` on `device` (eval mode, no grad)."""
    root = model_dir(path)
    if root.exists() and not root.is_dir():
        raise CheckpointNotFoundError(
            f"{root} is a file, not a checkpoint directory: this engine reads a directory "
            f"holding config.json and *.safetensors (a GGUF file runs on --backend llama)"
        )
    if not root.is_dir():
        raise CheckpointNotFoundError(
            f"checkpoint directory {root} does not exist: pass a local directory holding "
            f"config.json and *.safetensors (models are never downloaded)"
        )
    config = _with_generation_eos(HybridConfig.from_file(root / "config.json"), root)
    files = sorted(root.glob("*.safetensors"))
    if not files:
        raise CheckpointNotFoundError(
            f"no *.safetensors files in {root}: convert the weights to safetensors "
            f"(save_pretrained does this by default)"
        )
    with torch.device("meta"):
        model = HybridModel(config)
    expected = {name: p.shape for name, p in model.named_parameters()}
    weights = _read_weights(files, expected, config.tie_word_embeddings)
    missing = sorted(set(expected) - set(weights))
    if missing:
        raise CheckpointFormatError(
            f"{root} lacks {len(missing)} tensor(s) the config needs, e.g. {missing[:5]}; "
            f"is config.json the one these weights were saved with?"
        )
    model.load_state_dict({k: v.to(device=device, dtype=dtype) for k, v in weights.items()},
                          assign=True)
    model.eval().requires_grad_(False)
    return LoadedCheckpoint(path=root, config=config, model=model,
                            tokenizer=_load_tokenizer(root))


def local_name(key: str) -> str | None:
    """Our parameter name for a checkpoint key, or None for tensors outside the decoder."""
    if key.startswith(_IGNORED):
        return None
    return next((key[len(prefix):] for prefix in _PREFIXES if key.startswith(prefix)), key)


def _read_weights(files: list[Path], expected: dict[str, torch.Size],
                  tied: bool) -> dict[str, Tensor]:
    weights: dict[str, Tensor] = {}
    unexpected: list[str] = []
    for file in files:
        try:
            with safe_open(str(file), framework="pt", device="cpu") as handle:
                names = handle.keys()  # safe_open is not a mapping: iterate its key list
                for key in names:
                    name = local_name(key)
                    if name is None or (tied and name == "lm_head.weight"):
                        continue  # a tied head is the embedding, as transformers does
                    if name not in expected:
                        unexpected.append(key)
                        continue
                    weights[name] = _checked(handle.get_tensor(key), expected[name], file, key)
        except SafetensorError as err:
            raise CheckpointFormatError(f"{file} is not a readable safetensors file: {err}") \
                from err
    if unexpected:
        raise CheckpointFormatError(
            f"{len(unexpected)} tensor(s) do not belong to a Qwen3.5 text decoder with this "
            f"config, e.g. {unexpected[:5]}"
        )
    return weights


def _checked(tensor: Tensor, shape: torch.Size, file: Path, key: str) -> Tensor:
    if tensor.shape != shape:
        raise CheckpointFormatError(
            f"{file.name}: {key} has shape {tuple(tensor.shape)}, the config implies "
            f"{tuple(shape)}"
        )
    return tensor


def _with_generation_eos(config: HybridConfig, root: Path) -> HybridConfig:
    # generation_config.json often carries the chat EOS ids that config.json lacks.
    path = root / "generation_config.json"
    if config.eos_token_ids or not path.is_file():
        return config
    try:
        eos = json.loads(path.read_text()).get("eos_token_id")
    except json.JSONDecodeError as err:
        raise CheckpointFormatError(f"{path} is not valid JSON: {err}") from err
    if eos is None:
        return config
    return dataclasses.replace(config, eos_token_ids=tuple(eos if isinstance(eos, list)
                                                           else [eos]))


def _load_tokenizer(root: Path) -> Tokenizer | None:
    path = root / "tokenizer.json"
    if not path.is_file():
        return None
    try:
        return Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises a bare Exception on bad files
        raise CheckpointFormatError(f"{path} is not a valid tokenizers file: {err}") from err
