"""Verification of a draft against target logits: greedy exact match, or lossless
rejection sampling (temperature, top-k, top-p) with a seeded generator so that a
re-execution on the same device draws the same numbers.

Pure functions over tensors; the result is expressed as `targets` (the target's token
after each batch position), the form `engine.speculative.accepted_block` consumes:
targets[i] == drafts[i] for every accepted draft, and targets[j] is the correction or
bonus token.
"""

from dataclasses import dataclass

import torch

from engine.config import check_setting


@dataclass(frozen=True)
class SamplingParams:
    """temperature 0 is greedy; top_k 0 and top_p 1.0 disable those filters."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        for name in ("temperature", "top_k", "top_p"):  # bounds as `RunConfig` declares them
            check_setting(name, getattr(self, name))

    @property
    def greedy(self) -> bool:
        """True when verification is exact match."""
        return self.temperature == 0.0


def probs(logits: torch.Tensor, p: SamplingParams) -> torch.Tensor:
    """The target distribution after temperature, top-k and top-p. (T, V) -> (T, V)."""
    x = logits.float() / p.temperature
    if p.top_k:
        kth = torch.topk(x, min(p.top_k, x.shape[-1]), dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if p.top_p < 1.0:
        sorted_x, order = torch.sort(x, dim=-1, descending=True)
        cum = torch.softmax(sorted_x, dim=-1).cumsum(-1)
        drop = cum - torch.softmax(sorted_x, dim=-1) >= p.top_p  # keep the token crossing p
        sorted_x = sorted_x.masked_fill(drop, float("-inf"))
        x = torch.full_like(x, float("-inf")).scatter(-1, order, sorted_x)
    return torch.softmax(x, dim=-1)


def greedy_targets(logits: torch.Tensor) -> list[int]:
    """Argmax after each position. (T, V) -> T tokens."""
    return logits.argmax(dim=-1).tolist()


def rejection_targets(
    logits: torch.Tensor,
    drafts: list[int],
    draft_probs: torch.Tensor | None,
    p: SamplingParams,
    gen: torch.Generator,
) -> list[int]:
    """Speculative sampling (Leviathan et al.; Chen et al.): accept draft i with
    probability min(1, p_i(d) / q_i(d)); at the first rejection sample from
    norm(max(p_i - q_i, 0)); after k acceptances sample the bonus from p_k. A drafter
    without a distribution (n-gram) is a point mass: q_i(d) = 1.

    logits: (k + 1, V); draft_probs: (k, V) or None. Returns k + 1 targets, valid up to
    the first mismatch (positions after it are never read).
    """
    target = probs(logits, p)  # (k + 1, V)
    out: list[int] = []
    for i, d in enumerate(drafts):
        q = draft_probs[i] if draft_probs is not None else None
        p_d = float(target[i, d])
        q_d = float(q[d]) if q is not None else 1.0
        u = float(torch.rand((), generator=gen))
        if q_d > 0 and u < min(1.0, p_d / q_d):
            out.append(d)
            continue
        residual = target[i].clone()
        if q is not None:
            residual = (residual - q).clamp_min(0)
        else:
            residual[d] = 0.0
        total = float(residual.sum())
        dist = residual / total if total > 0 else target[i]
        out.append(int(torch.multinomial(dist, 1, generator=gen)))
        return out + [out[-1]] * (len(drafts) - i)
    out.append(int(torch.multinomial(target[len(drafts)], 1, generator=gen)))
    return out


def verify_targets(
    logits: torch.Tensor,
    drafts: list[int],
    draft_probs: torch.Tensor | None,
    p: SamplingParams,
    gen: torch.Generator | None,
) -> list[int]:
    """Greedy or rejection-sampled targets for one verify batch."""
    if p.greedy:
        return greedy_targets(logits)
    if gen is None:
        raise ValueError("sampled verification needs a seeded generator")
    return rejection_targets(logits, drafts, draft_probs, p, gen)
