"""Conversations as one token stream and the random training windows cut from it. Every
window starts at a conversation's first token (as evaluation and serving do, from an empty
state) and runs on into the next conversation after `<|endoftext|>`."""

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from engine.hybrid.tokenizer import END_OF_TEXT, chat_template
from engine.training.conversations import Conversation


@dataclass(frozen=True)
class Batch:
    """Training windows and, per token, whether it belongs to an assistant answer."""

    tokens: Tensor  # (B, T) long
    answer: Tensor  # (B, T) bool

    def target_weights(self, prompt_weight: float) -> Tensor:
        """Loss weight of each predicted token (positions 1..T-1): 1 on answers,
        `prompt_weight` elsewhere, normalised to sum to 1."""
        weights = torch.where(self.answer[:, 1:], 1.0, prompt_weight)
        return weights / weights.sum()


class TokenStream:
    """All conversations back to back, each followed by `<|endoftext|>`."""

    def __init__(self, conversations: Sequence[Conversation]) -> None:
        if not conversations:
            raise ValueError("no conversations to train on")
        template = chat_template()
        tokens: list[int] = []
        answer: list[bool] = []
        starts: list[int] = []
        for conversation in conversations:
            starts.append(len(tokens))
            tokens += [*conversation.tokens(template), END_OF_TEXT]
            answer += [*conversation.answer_mask(template), False]
        self.tokens = torch.tensor(tokens, dtype=torch.long)
        self.answer = torch.tensor(answer, dtype=torch.bool)
        self.starts = torch.tensor(starts, dtype=torch.long)

    def __len__(self) -> int:
        return self.tokens.numel()

    def batch(self, batch_size: int, length: int, generator: torch.Generator) -> Batch:
        """(batch_size, length) windows from random conversation starts; a window that
        would run past the end wraps round to the stream's beginning."""
        picks = torch.randint(len(self.starts), (batch_size,), generator=generator)
        offsets = (self.starts[picks][:, None] + torch.arange(length)[None, :]) % len(self)
        return Batch(self.tokens[offsets], self.answer[offsets])
