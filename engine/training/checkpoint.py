"""Write a trained model as a HF-format Qwen3.5 checkpoint directory (config.json,
generation_config.json, model.safetensors with `model.*` and optional `mtp.*` tensors,
tokenizer.json) plus its training record (train_config.json, loss.csv, loss.png)."""

import csv
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from safetensors.torch import save_file
from torch import Tensor

from engine.hybrid.config import REQUIRED, HybridConfig
from engine.hybrid.model import HybridModel
from engine.hybrid.mtp import PREFIX as MTP_PREFIX
from engine.hybrid.tokenizer import END_OF_TEXT, build_tokenizer
from engine.training.loop import LogRow


def hf_config(config: HybridConfig, mtp_layers: int) -> dict[str, Any]:
    """The config.json of a `Qwen3_5ForCausalLM` text model with this architecture."""
    return {
        "architectures": ["Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_text",
        **{name: getattr(config, name) for name in REQUIRED},
        "layer_types": list(config.layer_types),
        "hidden_act": "silu",
        "rms_norm_eps": config.rms_norm_eps,
        "rope_parameters": {"rope_type": "default", "rope_theta": config.rope_theta,
                            "partial_rotary_factor": config.partial_rotary_factor},
        "attention_bias": config.attention_bias,
        "tie_word_embeddings": config.tie_word_embeddings,
        "max_position_embeddings": 4096,
        "initializer_range": 0.02,
        "eos_token_id": list(config.eos_token_ids),
        "pad_token_id": END_OF_TEXT,
        "mtp_num_hidden_layers": mtp_layers,
        "dtype": "float32",
    }


def save_checkpoint(root: Path, model: HybridModel, mtp: Mapping[str, Tensor] | None = None,
                    ) -> Path:
    """Write the model (and an MTP head's `state_dict()`, stored under `mtp.`) to `root`;
    returns the safetensors file."""
    root.mkdir(parents=True, exist_ok=True)
    config = model.config
    tensors = {f"model.{name}": t for name, t in model.state_dict().items()}
    if config.tie_word_embeddings:
        tensors.pop("model.lm_head.weight", None)
    else:
        tensors["lm_head.weight"] = tensors.pop("model.lm_head.weight")
    tensors.update({f"{MTP_PREFIX}{name}": t for name, t in (mtp or {}).items()})
    path = root / "model.safetensors"
    save_file({k: v.detach().contiguous() for k, v in tensors.items()}, str(path),
              metadata={"format": "pt"})
    _write_json(root / "config.json", hf_config(config, mtp_layers=1 if mtp else 0))
    _write_json(root / "generation_config.json",
                {"eos_token_id": list(config.eos_token_ids), "pad_token_id": END_OF_TEXT,
                 "do_sample": False})
    build_tokenizer().save(str(root / "tokenizer.json"))
    return path


def save_record(root: Path, train_config: Mapping[str, Any], rows: Sequence[LogRow]) -> None:
    """Write train_config.json, loss.csv (every step) and loss.png (smoothed curves)."""
    _write_json(root / "train_config.json", dict(train_config))
    with (root / "loss.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["phase", "step", "elapsed_s", "lr", "loss"])
        for r in rows:
            writer.writerow([r.phase, r.step, f"{r.elapsed_s:.2f}", f"{r.lr:.6g}",
                             f"{r.loss:.5f}"])
    _plot(root / "loss.png", rows)


def _plot(path: Path, rows: Sequence[LogRow]) -> None:
    import matplotlib  # only the training tool draws; serving never imports this

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for phase in dict.fromkeys(r.phase for r in rows):
        losses = [r.loss for r in rows if r.phase == phase]
        width = max(1, len(losses) // 50)
        windows = (losses[max(0, i - width + 1):i + 1] for i in range(len(losses)))
        ax.plot(range(1, len(losses) + 1), [sum(w) / len(w) for w in windows], label=phase)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (answer-weighted cross-entropy, nats)")
    ax.set_title("training loss (moving average)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")
