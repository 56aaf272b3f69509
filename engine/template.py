"""The chat template (ChatML, as Qwen uses): where turns begin and where answers end."""

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ChatTemplate:
    """Token ids of the template pieces for one vocabulary.

    A conversation is `user(q1) + header + answer1 + [im_end]`, then `+ [nl] + user(q2)
    + header + ...`; `im_end` is the end-of-generation token.
    """

    im_start: int
    im_end: int
    end_of_text: int
    nl: tuple[int, ...]
    user: tuple[int, ...]
    assistant: tuple[int, ...]

    @property
    def eog_ids(self) -> frozenset[int]:
        """Tokens that end a generation."""
        return frozenset((self.im_end, self.end_of_text))

    @property
    def header(self) -> list[int]:
        """The generation prompt that opens the assistant's answer."""
        return [self.im_start, *self.assistant, *self.nl]

    def user_turn(self, question: Sequence[int]) -> list[int]:
        """One user message, closed."""
        return [self.im_start, *self.user, *self.nl, *question, self.im_end, *self.nl]

    def next_prompt(self, transcript: Sequence[int], question: Sequence[int]) -> list[int]:
        """The whole prompt of the next turn: the visible history, the new question and
        the generation header. The separator after a previous answer is part of the new
        prompt, never of the old answer; so is the `im_end` that closes an answer cut
        without one, as a chat template closes every assistant message (llama-server's
        does: docs/design.md#multi-turn-slots)."""
        if not transcript:
            sep: list[int] = []
        elif transcript[-1] in self.eog_ids:
            sep = list(self.nl)
        else:
            sep = [self.im_end, *self.nl]
        return [*transcript, *sep, *self.user_turn(question), *self.header]
