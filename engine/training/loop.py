"""One training phase: AdamW under a warmup + cosine schedule that runs over a step count
or over a wall-clock budget (so a busy machine trains for fewer steps, not longer), with
the loss of every step logged."""

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from engine.training.configs import PhaseConfig
from engine.training.data import Batch, TokenStream

Log = Callable[[str], None]


@dataclass(frozen=True)
class LogRow:
    """One optimiser step."""

    phase: str
    step: int
    elapsed_s: float
    lr: float
    loss: float


@dataclass(frozen=True)
class PhaseResult:
    """What one phase did."""

    name: str
    steps: int
    tokens: int
    seconds: float
    rows: tuple[LogRow, ...]

    @property
    def final_loss(self) -> float:
        """Mean loss of the last 20 steps (a single step is too noisy to quote)."""
        tail = [row.loss for row in self.rows[-20:]]
        return sum(tail) / len(tail) if tail else math.nan


def learning_rate(phase: PhaseConfig, progress: float) -> float:
    """Linear warmup over `phase.warmup` of the schedule, then cosine down to
    `min_lr_ratio * lr` at progress 1."""
    if progress < phase.warmup:
        return phase.lr * (progress / phase.warmup)
    rest = (progress - phase.warmup) / max(1e-9, 1.0 - phase.warmup)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, rest)))
    return phase.lr * (phase.min_lr_ratio + (1.0 - phase.min_lr_ratio) * cosine)


def init_weights(module: nn.Module) -> None:
    """transformers' Qwen3.5 initialisation: N(0, 0.02) for projections and embeddings,
    GDN decay rates A spread over (0, 16), dt_bias 1; norms keep their identity."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.empty_like(p).uniform_(1e-3, 16.0).log())
            elif name.endswith("dt_bias"):
                p.fill_(1.0)
            elif "norm" in name:
                continue
            elif name.endswith("conv1d.weight"):
                nn.init.kaiming_uniform_(p, a=math.sqrt(5))  # nn.Conv1d's own default
            else:
                p.normal_(0.0, 0.02)


def run_phase(
    phase: PhaseConfig, params: Iterable[nn.Parameter], loss_fn: Callable[[Batch], Tensor],
    stream: TokenStream, budget_s: float, generator: torch.Generator, log: Log = print,
) -> PhaseResult:
    """Minimise `loss_fn(batch)` over windows of seq_len + 1 tokens until `phase.steps`
    steps or `budget_s` seconds are done. Weight decay applies to matrices only."""
    params = [p for p in params if p.requires_grad]
    decayed = [p for p in params if p.ndim >= 2]
    kept = [p for p in params if p.ndim < 2]
    optimiser = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": phase.weight_decay},
         {"params": kept, "weight_decay": 0.0}],
        lr=phase.lr, betas=phase.betas,
    )
    rows: list[LogRow] = []
    start = time.monotonic()
    step = 0
    while True:
        elapsed = time.monotonic() - start
        progress = step / phase.steps if phase.steps is not None else elapsed / budget_s
        if progress >= 1.0:
            break
        lr = learning_rate(phase, progress)
        for group in optimiser.param_groups:
            group["lr"] = lr
        loss = loss_fn(stream.batch(phase.batch_size, phase.seq_len + 1, generator))
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, phase.grad_clip)
        optimiser.step()
        step += 1
        rows.append(LogRow(phase.name, step, time.monotonic() - start, lr, loss.item()))
        if step % 25 == 0:
            recent = [r.loss for r in rows[-25:]]
            log(f"{phase.name} step {step} {rows[-1].elapsed_s:.0f}s lr {lr:.2e} "
                f"loss {sum(recent) / len(recent):.3f}")
    return PhaseResult(phase.name, step, step * phase.batch_size * phase.seq_len,
                       time.monotonic() - start, tuple(rows))
