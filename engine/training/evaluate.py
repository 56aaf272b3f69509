"""Quality of the shipped models on held-out stdlib files: how often the target closes an
answer with `<|im_end|>` within 512 greedy tokens, and how often the draft model and the
MTP head guess the target's own next token (what speculative decoding needs)."""

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F

from engine.hybrid.model import HybridModel
from engine.hybrid.mtp import MtpHead
from engine.hybrid.tokenizer import END_OF_TEXT, IM_END, chat_template
from engine.training.conversations import Conversation, conversations
from engine.training.corpus import Split

MAX_NEW_TOKENS = 512
TurnTokens = tuple[list[int], list[int]]  # (prompt, reference answer ending in im_end)


@dataclass(frozen=True)
class EndRate:
    """How many held-out turns the model ended with `<|im_end|>` in time."""

    turns: int
    ended: int
    other_stop: int        # ended with <|endoftext|> instead
    mean_tokens: float     # generated tokens per ended turn, im_end included
    mean_reference: float  # reference answer tokens per turn, im_end included
    max_new_tokens: int

    @property
    def rate(self) -> float:
        """Fraction of turns ended with `<|im_end|>`."""
        return self.ended / self.turns if self.turns else 0.0


def held_out_turns(n: int, seed: int = 0,
                   pool: Sequence[Conversation] | None = None) -> list[TurnTokens]:
    """`n` held-out turns drawn by `seed`, each prompt carrying its conversation's
    reference history (so every turn is judged on its own)."""
    pool = conversations(Split.HELD_OUT) if pool is None else pool
    template = chat_template()
    turns = [turn for conversation in pool for turn in conversation.turn_tokens(template)]
    return random.Random(seed).sample(turns, min(n, len(turns)))


@torch.inference_mode()
def greedy(model: HybridModel, prompt: Sequence[int], max_new_tokens: int = MAX_NEW_TOKENS,
           stop: frozenset[int] = frozenset((IM_END, END_OF_TEXT))) -> list[int]:
    """Greedy continuation of `prompt` (one prefill, then one token per step), stopping
    after a `stop` token or `max_new_tokens` tokens."""
    state = model.new_state()
    logits = model(torch.tensor([list(prompt)]), state, last_only=True)
    out: list[int] = []
    while len(out) < max_new_tokens:
        token = int(logits[0, -1].argmax())
        out.append(token)
        if token in stop:
            break
        logits = model(torch.tensor([[token]]), state, last_only=True)
    return out


def end_rate(model: HybridModel, turns: Sequence[TurnTokens],
             max_new_tokens: int = MAX_NEW_TOKENS) -> EndRate:
    """Greedy-decode every turn and count answers closed by `<|im_end|>`."""
    lengths = []
    other = 0
    for prompt, _ in turns:
        answer = greedy(model, prompt, max_new_tokens)
        if answer[-1] == IM_END:
            lengths.append(len(answer))
        elif answer[-1] == END_OF_TEXT:
            other += 1
    mean_reference = sum(len(a) for _, a in turns) / max(1, len(turns))
    return EndRate(turns=len(turns), ended=len(lengths), other_stop=other,
                   mean_tokens=sum(lengths) / max(1, len(lengths)),
                   mean_reference=mean_reference, max_new_tokens=max_new_tokens)


@torch.no_grad()
def agreement(target: HybridModel, draft: HybridModel, mtp: MtpHead,
              pool: Sequence[Conversation]) -> dict[str, float]:
    """Teacher-forced on held-out conversations, over the positions whose predicted token
    is part of an assistant answer: the draft's and the MTP head's top-1 agreement with
    the target's own prediction, and each model's accuracy and loss on the text."""
    template = chat_template()
    totals: dict[str, list[float]] = {}

    def add(name: str, values: torch.Tensor, keep: torch.Tensor) -> None:
        total = totals.setdefault(name, [0.0, 0.0])
        total[0] += float((values.float() * keep).sum())
        total[1] += float(keep.sum())

    for conversation in pool:
        ids = torch.tensor(conversation.tokens(template))
        answer = torch.tensor(conversation.answer_mask(template))
        t_logits, hidden = target.train_logits(ids[None])
        d_logits, _ = draft.train_logits(ids[None])
        m_logits, _ = mtp(hidden[:, :-1], ids[None, 1:])  # position t predicts token t+2
        # Positions t = 0..T-3: every model has a guess there (of t+1, or of t+2 for MTP).
        t1, t2 = t_logits[0, :-2], t_logits[0, 1:-1]  # the target's guesses of t+1, t+2
        d1, m2 = d_logits[0, :-2], m_logits[0, :-1]
        nxt, nxt2, keep1, keep2 = ids[1:-1], ids[2:], answer[1:-1], answer[2:]
        add("draft_agreement", d1.argmax(-1) == t1.argmax(-1), keep1)
        add("mtp_agreement", m2.argmax(-1) == t2.argmax(-1), keep2)
        for name, logits, wanted, keep in (("target", t1, nxt, keep1), ("draft", d1, nxt, keep1),
                                           ("mtp", m2, nxt2, keep2)):
            add(f"{name}_accuracy", logits.argmax(-1) == wanted, keep)
            add(f"{name}_loss", F.cross_entropy(logits, wanted, reduction="none"), keep)
    out = {name: round(num / max(1.0, den), 4) for name, (num, den) in totals.items()}
    return out | {"answer_positions": int(totals.get("target_loss", [0, 0])[1])}


def evaluate(target: HybridModel, draft: HybridModel, mtp: MtpHead, turns: int = 200,
             agreement_conversations: int = 100, seed: int = 0) -> dict[str, Any]:
    """Every figure the shipped models are judged by, JSON-ready."""
    pool = conversations(Split.HELD_OUT)
    rate = end_rate(target, held_out_turns(turns, seed, pool))
    picked = random.Random(seed).sample(pool, min(agreement_conversations, len(pool)))
    return {"im_end_rate": round(rate.rate, 4), "end_rate": asdict(rate),
            "teacher_forced": agreement(target, draft, mtp, picked), "seed": seed}

