"""Train the shipped models in one run: the target, then the draft (same tokenizer, own
config), then the MTP head on the frozen target, each within its share of a wall-clock
budget; save them as HF-format checkpoints with their training record."""

import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from engine.hybrid.model import HybridModel
from engine.hybrid.mtp import MtpHead
from engine.training.checkpoint import save_checkpoint, save_record
from engine.training.configs import PhaseConfig, TrainConfig, draft_config, target_config
from engine.training.conversations import conversations
from engine.training.corpus import Split, stdlib_root
from engine.training.data import Batch, TokenStream
from engine.training.loop import Log, PhaseResult, init_weights, run_phase


@dataclass(frozen=True)
class Trained:
    """The trained models and what each phase did."""

    target: HybridModel
    draft: HybridModel
    mtp: MtpHead
    phases: dict[str, PhaseResult]
    wall_s: float


def lm_loss(model: HybridModel, prompt_weight: float) -> Callable[[Batch], Tensor]:
    """Next-token cross-entropy over a (B, T + 1) window, prompt tokens weighted down
    (the model serves answers; prompts are only read)."""
    def loss(batch: Batch) -> Tensor:
        logits, _ = model.train_logits(batch.tokens[:, :-1])
        losses = F.cross_entropy(logits.transpose(1, 2), batch.tokens[:, 1:], reduction="none")
        return (losses * batch.target_weights(prompt_weight)).sum()
    return loss


def mtp_loss(head: MtpHead, prompt_weight: float) -> Callable[[Batch], Tensor]:
    """Distillation loss of the MTP head: at each position t its distribution over token
    t+2 against the frozen target's own prediction of t+2 (made at t+1), since drafts are
    accepted by agreeing with the target, not with the corpus."""
    target = head.target

    def loss(batch: Batch) -> Tensor:
        ids = batch.tokens
        with torch.no_grad():
            logits, hidden = target.train_logits(ids[:, :-1])
            wanted = logits[:, 1:].softmax(-1)
        predicted, _ = head(hidden[:, :-1], ids[:, 1:-1])
        losses = F.cross_entropy(predicted.transpose(1, 2), wanted.transpose(1, 2),
                                 reduction="none")  # (B, T - 1): tokens 2..T
        return (losses * batch.target_weights(prompt_weight)[:, 1:]).sum()
    return loss


def train(config: TrainConfig, log: Log = print) -> Trained:
    """Run the three phases on the stdlib's train split."""
    torch.set_num_threads(config.threads)
    started = time.monotonic()
    stream = TokenStream(conversations(Split.TRAIN, max_files=config.max_files))
    # Corpus preparation comes out of the budget; the phases share the rest.
    budget = max(1.0, config.minutes * 60.0 - (time.monotonic() - started))
    log(f"corpus: {len(stream.starts)} conversations, {len(stream)} tokens "
        f"({time.monotonic() - started:.0f}s)")

    def phase(settings: PhaseConfig, module: torch.nn.Module,
              loss: Callable[[Batch], Tensor], index: int) -> PhaseResult:
        return run_phase(settings, module.parameters(), loss, stream, settings.share * budget,
                         torch.Generator().manual_seed(config.seed * 1000 + index), log)

    torch.manual_seed(config.seed)
    target = HybridModel(target_config(config.family))
    init_weights(target)
    phases = {"target": phase(config.target, target,
                              lm_loss(target, config.target.prompt_weight), 1)}
    torch.manual_seed(config.seed + 1)
    draft = HybridModel(draft_config(config.family))
    init_weights(draft)
    phases["draft"] = phase(config.draft, draft, lm_loss(draft, config.draft.prompt_weight), 2)
    target.eval().requires_grad_(False)
    torch.manual_seed(config.seed + 2)
    head = MtpHead(target)
    init_weights(head)
    phases["mtp"] = phase(config.mtp, head, mtp_loss(head, config.mtp.prompt_weight), 3)
    for model in (draft, head):
        model.eval().requires_grad_(False)
    return Trained(target, draft, head, phases, time.monotonic() - started)


def save(trained: Trained, out: Path, config: TrainConfig) -> dict[str, Path]:
    """Write OUT/target (with the MTP head under `mtp.`) and OUT/draft."""
    record = _record(trained, config)
    dirs = {"target": out / "target", "draft": out / "draft"}
    save_checkpoint(dirs["target"], trained.target, trained.mtp.state_dict())
    save_record(dirs["target"], record,
                trained.phases["target"].rows + trained.phases["mtp"].rows)
    save_checkpoint(dirs["draft"], trained.draft)
    save_record(dirs["draft"], record, trained.phases["draft"].rows)
    return dirs


def parameter_count(module: torch.nn.Module) -> int:
    """Parameters owned by `module` (an MTP head's shared embedding/LM head excluded)."""
    return sum(p.numel() for p in module.parameters())


def _record(trained: Trained, config: TrainConfig) -> dict[str, Any]:
    return {
        "train": config.to_dict(),
        "wall_time_s": round(trained.wall_s, 1),
        "phases": {name: {"steps": r.steps, "tokens": r.tokens, "seconds": round(r.seconds, 1),
                          "final_loss": round(r.final_loss, 4)}
                   for name, r in trained.phases.items()},
        "parameters": {"target": parameter_count(trained.target),
                       "draft": parameter_count(trained.draft),
                       "mtp": parameter_count(trained.mtp)},
        "models": {"target": asdict(trained.target.config),
                   "draft": asdict(trained.draft.config)},
        "corpus": {"source": "Python standard library", "stdlib": str(stdlib_root()),
                   "python": sys.version.split()[0], "split": "sha256(relative path)"},
        "machine": {"platform": platform.platform(), "torch": torch.__version__,
                    "threads": torch.get_num_threads()},
    }
