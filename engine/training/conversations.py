"""Stdlib functions shaped into ChatML conversations: a conversation is a run of
functions from one file; its first user message is long (the code before the function,
then the signature and docstring), later ones are short (a signature); each answer is
the function body closed by `<|im_end|>`."""

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from engine.hybrid.tokenizer import chat_template, encode
from engine.template import ChatTemplate
from engine.training.corpus import Function, Split, iter_functions

MAX_TURNS = 4
# Whole conversations fit the training window, so evaluation prompts stay in the range of
# positions the models were trained on.
MAX_CONVERSATION_TOKENS = 1024


@dataclass(frozen=True)
class Turn:
    """One exchange: the user's message and the reference answer, as text."""

    question: str
    answer: str


@dataclass(frozen=True)
class Conversation:
    """Turns about functions of one source file."""

    path: str
    turns: tuple[Turn, ...]

    def turn_tokens(self, template: ChatTemplate) -> list[tuple[list[int], list[int]]]:
        """Per turn: the full prompt (reference history, question, generation header) and
        the reference answer with its closing `im_end`."""
        transcript: list[int] = []
        out = []
        for turn in self.turns:
            prompt = template.next_prompt(transcript, encode(turn.question))
            answer = [*encode(turn.answer), template.im_end]
            out.append((prompt, answer))
            transcript = prompt + answer
        return out

    def tokens(self, template: ChatTemplate) -> list[int]:
        """The whole conversation as the model is trained on it."""
        prompt, answer = self.turn_tokens(template)[-1]
        return prompt + answer

    def answer_mask(self, template: ChatTemplate) -> list[bool]:
        """Per token of `tokens`: True on the assistant's answers (`im_end` included)."""
        mask: list[bool] = []
        for prompt, answer in self.turn_tokens(template):
            mask += [False] * (len(prompt) - len(mask)) + [True] * len(answer)
        return mask


def first_question(f: Function) -> str:
    """The long opening message: the code before the function, then its header."""
    context = f"{f.context}\n\n" if f.context else ""
    return f"Here is code from {f.path}:\n\n{context}Complete this function:\n\n{f.header}"


def later_question(f: Function) -> str:
    """A short follow-up message: the signature alone."""
    return f"Now complete this one:\n\n{f.signature}"


def shape(funcs: Iterable[Function]) -> Iterator[Conversation]:
    """Group consecutive functions of the same file into conversations of at most
    MAX_TURNS turns and MAX_CONVERSATION_TOKENS tokens; a function whose opening turn
    alone is too long is skipped."""
    template = chat_template()
    turns: list[Turn] = []
    path, size = "", 0
    for f in funcs:
        if turns and f.path == path and len(turns) < MAX_TURNS:
            turn = Turn(later_question(f), f.body)
            cost = _cost(turn, template, first=False)
            if size + cost <= MAX_CONVERSATION_TOKENS:
                turns.append(turn)
                size += cost
                continue
        if turns:
            yield Conversation(path, tuple(turns))
        turn = Turn(first_question(f), f.body)
        path, size = f.path, _cost(turn, template, first=True)
        turns = [turn] if size <= MAX_CONVERSATION_TOKENS else []
    if turns:
        yield Conversation(path, tuple(turns))


def conversations(split: Split, root: Path | None = None,
                  max_files: int | None = None) -> list[Conversation]:
    """Every conversation of `split`, in file order (deterministic for one stdlib)."""
    return list(shape(iter_functions(split, root, max_files)))


@cache
def _held_out(root: Path | None) -> tuple[Function, ...]:
    """The held-out functions, parsed once per process: every torch session asks for its
    questions, and parsing the standard library takes most of a second."""
    return tuple(iter_functions(Split.HELD_OUT, root))


def conversation_prompts(seed: int, n: int, root: Path | None = None) -> list[list[int]]:
    """`n` held-out user messages (token lists) for one conversation, chosen by `seed`:
    the first is long (code context and a function to complete), the others short (the
    signatures of the functions that follow it, wrapping round the held-out files)."""
    funcs = _held_out(root)
    if not funcs:
        raise ValueError("no held-out functions: is the Python standard library present?")
    start = random.Random(seed).randrange(len(funcs))
    picked = [funcs[(start + i) % len(funcs)] for i in range(n)]
    return [encode(first_question(f) if i == 0 else later_question(f))
            for i, f in enumerate(picked)]


def _cost(turn: Turn, template: ChatTemplate, first: bool) -> int:
    """Tokens a turn adds to a conversation (`Conversation.tokens` lays them out)."""
    separator = 0 if first else len(template.nl)
    question, answer = encode(turn.question), encode(turn.answer)
    return separator + len(template.user_turn(question)) + len(template.header) + len(answer) + 1
