"""Model-free drafters that look the continuation up in the token history, as llama.cpp's
docs/speculative.md describes them.

- `ngram-simple`: find the last earlier occurrence of the current n-gram and draft the
  tokens that followed it.
- `ngram-map-k`: keep a map from each n-gram key to the m-gram that followed it and how
  many times in a row it did; draft only keys with at least `min_hits` hits.
- `ngram-mod`: a fixed-size pool from the hash of an n-gram to the next token, shared by
  every slot; drafts grow one token at a time (variable length) and the pool is cleared
  after a streak of rounds with almost nothing accepted.

All index the slot's tokens lazily in `propose`, so a new turn whose prompt rewrote the
history re-indexes from the common prefix.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.backend import Backend, SeqState
from engine.drafters.base import BaseDrafter
from engine.speculative import common_prefix

_LCG_MUL = 6364136223846793005
_LCG_ADD = 1442695040888963407
_MASK = (1 << 64) - 1


@dataclass(frozen=True)
class NgramParams:
    """`n`: key length; `m`: draft m-gram length (map-k); `draft_min`: shorter drafts are
    dropped; `min_hits`: map-k's required repetitions; `pool_size`: ngram-mod's table;
    `reset_streak`: ngram-mod clears its pool after this many low-acceptance rounds."""

    n: int = 4
    m: int = 16
    draft_min: int = 0
    min_hits: int = 1
    pool_size: int = 1 << 20
    reset_streak: int = 8
    reset_below: float = 0.1


class _Indexed(BaseDrafter):
    """Tracks which prefix of the slot's tokens has been indexed."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def _sync(self, tokens: Sequence[int]) -> int:
        """Forget what the history no longer holds; return where new tokens begin."""
        keep = common_prefix(self.seen, tokens)
        if keep < len(self.seen):
            self._forget(keep)
            del self.seen[keep:]
        start = len(self.seen)
        self.seen.extend(tokens[start:])
        return start

    def _forget(self, keep: int) -> None:
        """Drop index entries built from tokens beyond `keep` (default: nothing kept)."""


class NgramSimple(BaseDrafter):
    """The last earlier match of the current n-gram, and what followed it."""

    name = "ngram-simple"

    def __init__(self, p: NgramParams) -> None:
        self.p = p


    def propose(self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
                ) -> list[int]:
        """Up to `k` tokens after the latest earlier occurrence of tokens[-n:]."""
        n = self.p.n
        if len(tokens) <= n:
            return []
        key = list(tokens[-n:])
        for i in range(len(tokens) - n - 1, -1, -1):
            if tokens[i] == key[0] and list(tokens[i:i + n]) == key:
                draft = list(tokens[i + n:i + n + k])
                return draft if len(draft) >= max(1, self.p.draft_min) else []
        return []


class NgramMapK(_Indexed):
    """Key n-gram -> (m-gram that followed, consecutive hits)."""

    name = "ngram-map-k"

    def __init__(self, p: NgramParams) -> None:
        super().__init__()
        self.p = p
        self.map: dict[tuple[int, ...], tuple[tuple[int, ...], int]] = {}
        self._indexed_upto = 0  # keys starting before this index are in the map

    def _forget(self, keep: int) -> None:
        self.map.clear()  # rebuilding is cheaper than tracking which entries came from where
        self._indexed_upto = 0

    def _index(self, tokens: Sequence[int]) -> None:
        n, m = self.p.n, self.p.m
        last = len(tokens) - n - m
        for j in range(self._indexed_upto, last + 1):
            key = tuple(tokens[j:j + n])
            val = tuple(tokens[j + n:j + n + m])
            old = self.map.get(key)
            self.map[key] = (val, old[1] + 1) if old is not None and old[0] == val else (val, 1)
        self._indexed_upto = max(self._indexed_upto, last + 1)

    def propose(self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
                ) -> list[int]:
        """The stored m-gram of the current key, if it repeated `min_hits` times."""
        self._sync(tokens)
        self._index(tokens)
        hit = self.map.get(tuple(tokens[-self.p.n:]))
        if hit is None or hit[1] < self.p.min_hits:
            return []
        draft = list(hit[0][:k])
        return draft if len(draft) >= max(1, self.p.draft_min) else []


@dataclass
class HashPool:
    """ngram-mod's table, shared by all slots of a session: n-gram hash -> next token."""

    size: int
    table: dict[int, int] = field(default_factory=dict)
    resets: int = 0


def ngram_hash(tokens: Sequence[int]) -> int:
    """LCG hash of an n-gram."""
    h = 0
    for tok in tokens:
        h = (h * _LCG_MUL + tok + _LCG_ADD) & _MASK
    return h


class NgramMod(_Indexed):
    """Rolling n-gram hash -> next token, one token at a time."""

    name = "ngram-mod"

    def __init__(self, p: NgramParams, pool: HashPool) -> None:
        super().__init__()
        self.p = p
        self.pool = pool
        self._streak = 0

    def propose(self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
                ) -> list[int]:
        """Extend the history token by token while the pool knows the next one."""
        n, size, table = self.p.n, self.pool.size, self.pool.table
        start = self._sync(tokens)
        for i in range(max(start, n), len(tokens)):
            table[ngram_hash(tokens[i - n:i]) % size] = tokens[i]
        ctx = list(tokens[-n:])
        draft: list[int] = []
        while len(ctx) >= n and len(draft) < k:
            nxt = table.get(ngram_hash(ctx[-n:]) % size)
            if nxt is None:
                break
            draft.append(nxt)
            ctx.append(nxt)
        return draft if len(draft) >= max(1, self.p.draft_min) else []

    def on_commit(self, drafted: int, accepted: int) -> None:
        """Clear the pool after `reset_streak` rounds accepting under `reset_below`."""
        if drafted == 0:
            return
        self._streak = self._streak + 1 if accepted / drafted < self.p.reset_below else 0
        if self._streak >= self.p.reset_streak:
            self.pool.table.clear()
            self.pool.resets += 1
            self._streak = 0
