"""The math of one round as pure functions: how many drafts survive, and what is kept."""

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from engine.config import EogPolicy


def count_accepted(drafts: Sequence[int], targets: Sequence[int]) -> int:
    """Greedy verification: the length of the prefix of `drafts` that equals the target's
    tokens (`targets[i]` is the target after batch position i, i.e. the check of
    `drafts[i]`)."""
    return common_prefix(drafts, targets)


@dataclass(frozen=True, slots=True)
class Block:
    """What a round commits.

    `tokens` are appended to the slot; `consumed` is how many batch positions the state
    must keep (the last committed token is never consumed in the round that commits it);
    `eog` is the index of the end-of-generation token in `tokens`, if any; `cut` counts
    accepted tokens dropped behind that EOG (truncate policy).
    """

    tokens: list[int]
    consumed: int
    accepted: int
    eog: int | None
    cut: int


def accepted_block(
    drafts: Sequence[int],
    targets: Sequence[int],
    eog_ids: Collection[int],
    policy: EogPolicy,
) -> Block:
    """Accepted drafts plus the target's own token, with the EOG policy applied.

    `truncate` cuts everything behind the first EOG before any rollback accounting
    (llama.cpp PR #28232); `legacy` keeps the whole block and only reports where the EOG
    is, which leaves stray tokens in the slot (#28049).
    """
    j = count_accepted(drafts, targets)
    tokens = [*drafts[:j], targets[j]]
    eog = next((i for i, tok in enumerate(tokens) if tok in eog_ids), None)
    cut = 0
    if eog is not None and policy is EogPolicy.TRUNCATE:
        cut = len(tokens) - (eog + 1)
        tokens = tokens[: eog + 1]
    return Block(tokens=tokens, consumed=len(tokens), accepted=j, eog=eog, cut=cut)


def visible_answer(tokens: Sequence[int], eog_ids: Collection[int]) -> list[int]:
    """The answer a user sees: everything through the first EOG."""
    for i, tok in enumerate(tokens):
        if tok in eog_ids:
            return list(tokens[: i + 1])
    return list(tokens)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix."""
    n = min(len(a), len(b))
    if list(a[:n]) == list(b[:n]):
        return n
    i = 0
    while a[i] == b[i]:
        i += 1
    return i
