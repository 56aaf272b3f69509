"""The simulated backend: deterministic from its seed, fast, and faithful in the one way
that matters here: its recurrent state cannot be trimmed.

The recurrent state is a hash chain over the consumed tokens, so a rejected token that is
not rolled back changes the digest for good; the attention part is a positional token
list that trims freely. The target is a pseudo-random token process that reads its own
state: it ends the answer after `answer_tokens`, may end it early with `eog_prob`, and
with `tie_flip_rate` some positions are near-ties whose argmax depends on the batch
shape (the numerics behind llama.cpp #28060).
"""

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.backend import UBATCH, Capabilities, Keep, VerifyOut
from engine.config import RunConfig
from engine.sim.costs import CostProfile, Placement, get_profile
from engine.sim.hashing import chain, hexdigest, keyed, mix, unit
from engine.sim.vocab import ASSISTANT, IM_END, IM_START, NL, SIM_TEMPLATE, VOCAB
from engine.speculative import common_prefix
from fsm.invariants import Audit

_HEADER_START = [IM_START, ASSISTANT]  # followed by NL: the assistant header


@dataclass
class SimState:
    """Recurrent digest `h`, the consumed tokens `kv` (the attention part), and where the
    current answer began (the state has seen the assistant header)."""

    h: int = 0
    kv: list[int] = field(default_factory=list)
    answer_start: int | None = None

    @property
    def position(self) -> int:
        """Tokens consumed."""
        return len(self.kv)


@dataclass(frozen=True)
class SimSnapshot:
    """A restorable copy: digest, KV length and answer start."""

    h: int
    length: int
    answer_start: int | None


def _header_end(kv: Sequence[int], upto: int) -> int | None:
    """Position just after the last assistant header within kv[:upto]."""
    for i in range(upto - 1, 1, -1):
        if kv[i] == NL and kv[i - 1] == ASSISTANT and kv[i - 2] == IM_START:
            return i + 1
    return None


class SimBackend:
    """`engine.backend.Backend` over hash-chain state with a cost-model clock."""

    name = "sim"
    clock = "simulated"
    template = SIM_TEMPLATE

    def __init__(self, config: RunConfig, profile: CostProfile | None = None) -> None:
        self.costs = profile or get_profile(config.profile)
        self._seed = keyed(config.seed, 0x7A46)
        # read once per token: plain attributes, not a chain of lookups
        self._answer_tokens = config.answer_tokens
        self._eog_prob = config.eog_prob
        self._tie_flip_rate = config.tie_flip_rate
        self._t = 0.0
        # one incremental twin per state (a slot's), so that slots whose rounds alternate
        # (the batched schedule) each keep theirs
        self._twins: dict[int, _Twin] = {}
        self._last_walk: _Walk | None = None
        # its own peek and continuation, and one forward over several slots' rows
        on_host = self.costs.checkpoint_place != Placement.DEVICE.value
        self.capabilities = Capabilities(
            oracle=self, verify_batch=self.verify_batch,
            checkpoint_tensors=self.costs.state_tensors if on_host else 0)

    # clock and sizes -------------------------------------------------------------
    def now(self) -> float:
        """Simulated seconds so far."""
        return self._t

    def state_bytes(self) -> int:
        """Bytes of one recurrent + conv state under the cost profile."""
        return int(self.costs.state_bytes)

    # the target --------------------------------------------------------------------
    def _predict(self, h: int, index: int, answer_start: int | None, batch: int) -> int:
        """The target's token at sequence index `index`, from the state `h` before it."""
        if answer_start is not None and index - answer_start == self._answer_tokens:
            return IM_END
        u = mix(self._seed ^ h)
        if (self._eog_prob > 0 and answer_start is not None and index > answer_start
                and unit(mix(u ^ 0xE06)) < self._eog_prob):
            return IM_END
        tok = u % VOCAB
        if (self._tie_flip_rate > 0 and unit(mix(u ^ 0x71E)) < self._tie_flip_rate
                and mix(u ^ (batch * 0x9E37)) & 1):
            tok = (tok + 1) % VOCAB  # this shape's rounding tips the near-tie the other way
        return tok

    def _consume(
        self, h: int, kv: list[int], start: int | None, tokens: Sequence[int], batch: int,
        predict_last: int,
    ) -> tuple[int, int | None, list[int]]:
        """Run `tokens` through the chain; return the final digest and answer start, and
        the targets after the last `predict_last` tokens (a prefill needs one, a replay
        forward all, an input replay none: each target costs a hash)."""
        targets: list[int] = []
        n = len(kv)
        first = len(tokens) - predict_last
        predict = self._predict
        for i, tok in enumerate(tokens):
            h = chain(h, tok)
            kv.append(tok)
            n += 1
            if tok == NL and n >= 3 and kv[-2] == ASSISTANT and kv[-3] == IM_START:
                start = n
            if i >= first:
                targets.append(predict(h, n, start, batch))
        return h, start, targets

    # state operations ----------------------------------------------------------------
    def new_state(self) -> SimState:
        """An empty state."""
        return SimState()

    def reset(self, state: SimState) -> None:
        """Back to position 0."""
        state.h, state.kv, state.answer_start = 0, [], None

    def prefill(self, state: SimState, tokens: Sequence[int]) -> int:
        """Consume the prompt in ubatch chunks; return the next token."""
        pos = state.position
        for i in range(0, len(tokens), UBATCH):
            self._t += self.costs.forward_s(min(UBATCH, len(tokens) - i), pos + i)
        state.h, state.answer_start, targets = self._consume(
            state.h, state.kv, state.answer_start, tokens, min(len(tokens), UBATCH), 1
        )
        return targets[-1]

    def verify(self, state: SimState, batch: Sequence[int], keep: Keep) -> VerifyOut:
        """One forward over `batch`, keeping what `keep` says. The drafter's peeks
        already walked most of the batch from this state: the walk is reused. (The round
        loop's own path: `verify_batch` of one row charges the same, through lists.)"""
        n = len(batch)
        self._t += self.costs.verify_s(n, state.position)
        out = self._verify_row(state, batch, keep, n)
        if keep is Keep.PER_TOKEN:
            self._t += self.costs.intermediate_write_s(n)
        return out

    def verify_batch(self, states: Sequence[SimState], batches: Sequence[Sequence[int]],
                     keeps: Sequence[Keep]) -> list[VerifyOut]:
        """One forward over every row (`engine.backend.BatchVerify`): the clock advances
        once, by the batched forward's cost, and near-ties see the whole forward's shape
        (its total tokens), so a row's targets can differ from its own verify's only where
        `tie_flip_rate` > 0 (llama.cpp #28060)."""
        self._t += self.costs.batch_verify_s([(len(b), st.position)
                                              for st, b in zip(states, batches, strict=True)])
        shape = sum(len(b) for b in batches)
        outs = [self._verify_row(st, b, keep, shape)
                for st, b, keep in zip(states, batches, keeps, strict=True)]
        written = sum(len(b) for b, keep in zip(batches, keeps, strict=True)
                      if keep is Keep.PER_TOKEN)
        if written:  # the per_token rows' states after every verified position
            self._t += self.costs.intermediate_write_s(written)
        return outs

    def _verify_row(self, state: SimState, batch: Sequence[int], keep: Keep,
                    shape: int) -> VerifyOut:
        """One row of a verify forward of `shape` tokens, its cost already paid."""
        w = self._walk(state, batch, shape)
        targets = list(w.targets)
        pos0 = state.position
        if keep is Keep.INPUTS:
            # The recurrence is not applied: only the attention KV is written, and the
            # per-position inputs (here: the tokens) are kept for the commit.
            kept = (state.h, pos0, state.answer_start, list(batch))
            state.kv.extend(batch)
            return VerifyOut(targets, kept)
        state.kv.extend(batch)
        state.h, state.answer_start = w.hs[-1], w.starts[-1]
        if keep is Keep.PER_TOKEN:
            return VerifyOut(targets, (pos0, list(w.hs), list(w.starts)))
        return VerifyOut(targets)

    def forward(self, state: SimState, tokens: Sequence[int]) -> list[int]:
        """A replay forward: consume `tokens`, return the target after each."""
        self._t += self.costs.forward_s(len(tokens), state.position)
        state.h, state.answer_start, targets = self._consume(
            state.h, state.kv, state.answer_start, tokens, len(tokens), len(tokens)
        )
        return targets

    def snapshot(self, state: SimState) -> SimSnapshot:
        """Copy the state (one checkpoint copy, where the profile keeps checkpoints)."""
        self._t += self.costs.checkpoint_s()
        return SimSnapshot(state.h, state.position, state.answer_start)

    def restore(self, state: SimState, snap: SimSnapshot) -> None:
        """Copy a snapshot back (one checkpoint copy); the KV trims to its length."""
        if snap.length > state.position:
            raise ValueError(f"snapshot at {snap.length} lies beyond position {state.position}")
        self._t += self.costs.checkpoint_s()
        state.h, state.answer_start = snap.h, snap.answer_start
        del state.kv[snap.length:]

    def select(self, state: SimState, kept: tuple[int, list[int], list[int | None]], index: int
               ) -> None:
        """Make the state after batch position `index` live (one state copy)."""
        pos0, hs, starts = kept
        self._t += self.costs.copy_s()
        state.h, state.answer_start = hs[index], starts[index]
        del state.kv[pos0 + index + 1:]

    def replay_inputs(
        self, state: SimState, kept: tuple[int, int, int | None, list[int]], n: int
    ) -> None:
        """Apply the recurrence over the first `n` recorded inputs."""
        h, pos0, start, tokens = kept
        self._t += self.costs.recurrence_s(n)
        del state.kv[pos0:]
        state.h, state.answer_start, _ = self._consume(h, state.kv, start, tokens[:n], n, 0)

    def trim(self, state: SimState, position: int) -> None:
        """Cut the attention KV; the digest keeps whatever it has absorbed."""
        del state.kv[position:]
        if state.answer_start is not None and state.answer_start > position:
            state.answer_start = _header_end(state.kv, position)

    def kv_length(self, state: SimState) -> int:
        """Tokens in the attention part."""
        return len(state.kv)

    def digest(self, state: SimState) -> str:
        """The recurrent state's digest."""
        return hexdigest(state.h)

    def audit(self, state: SimState, tokens: Sequence[int]) -> Audit:
        """Exact comparison with the sequential digest of the consumed `tokens`, kept
        incrementally: comparing whole prefixes after every commit would make a long
        conversation quadratic. Each state has its own twin; a list seen before is
        trusted up to what was audited (the engine only appends to a turn's list; its
        last audited token is checked); any other list is compared in full once."""
        n = state.position
        twin = self._twins.get(id(state))
        if twin is None or twin.state is not state:
            twin = self._twins[id(state)] = _Twin(state)
        known = twin.tokens
        m = min(len(known), n)
        if tokens is not twin.src or (m and known[m - 1] != tokens[m - 1]):
            m = common_prefix(known, tokens[:n])
            twin.src = tokens
        del known[m:]
        del twin.hs[m + 1:]
        h = twin.hs[-1]
        for tok in tokens[m:n]:
            h = chain(h, tok)
            known.append(tok)
            twin.hs.append(h)
        expected = twin.hs[n]
        return Audit(ok=expected == state.h, expected_digest=hexdigest(expected),
                     error=0.0 if expected == state.h else 1.0)

    def peek(self, state: SimState, tokens: Sequence[int]) -> list[int]:
        """Targets after each of `tokens` from `state`, free and without side effects."""
        return list(self._walk(state, tokens, len(tokens)).targets)

    def continuation(self, state: SimState, last: int, n: int) -> list[int]:
        """The target's own next `n` tokens: each walked token is the previous target.
        Token i is predicted as a peek of i + 1 tokens would (near-ties see that batch)."""
        w = self._walk(state, [last], 1)
        while len(w.targets) < n:
            self._step(w, w.targets[-1], len(w.tokens) + 1)
        return w.targets[:n]

    def _walk(self, state: SimState, tokens: Sequence[int], batch: int) -> "_Walk":
        """A walk of the chain from `state` whose first steps are `tokens` (new steps are
        predicted for a forward of `batch` tokens); the state is not touched. A drafter
        asks for the continuation, then verify runs the same tokens: without near-ties
        the targets do not depend on the batch, so the last walk from the same state is
        reused as far as it agrees with `tokens`."""
        c = self._last_walk
        # the digest and position identify the state (the kv tail follows from them)
        if (c is not None and self._tie_flip_rate == 0 and c.h0 == state.h
                and c.pos0 == state.position and c.start0 == state.answer_start):
            c.truncate(common_prefix(c.tokens, tokens))
        else:
            c = _Walk(state.h, state.position, state.answer_start, state.kv[-2:])
            self._last_walk = c
        for tok in tokens[len(c.tokens):]:
            self._step(c, tok, batch)
        return c

    def _step(self, w: "_Walk", tok: int, batch: int) -> None:
        """Walk one more token; its target is predicted for a forward of `batch` tokens."""
        h = chain(w.hs[-1] if w.hs else w.h0, tok)
        pos = w.pos0 + len(w.tokens) + 1
        start = w.starts[-1] if w.starts else w.start0
        if tok == NL and w.last_two() == _HEADER_START:
            start = pos
        w.tokens.append(tok)
        w.targets.append(self._predict(h, pos, start, batch))
        w.hs.append(h)
        w.starts.append(start)


@dataclass
class _Twin:
    """The audit's sequential twin of one state: the tokens it has chained, the digest
    after each prefix (`hs[i]`: after `tokens[:i]`), and the list they were read from."""

    state: SimState
    tokens: list[int] = field(default_factory=list)
    hs: list[int] = field(default_factory=lambda: [0])
    src: Sequence[int] | None = None


@dataclass
class _Walk:
    """A walk of the chain from a state (`h0`, `pos0`, `start0`, its last two tokens in
    `base_tail`) over `tokens`: the target, digest and answer start after each."""

    h0: int
    pos0: int
    start0: int | None
    base_tail: list[int]
    tokens: list[int] = field(default_factory=list)
    targets: list[int] = field(default_factory=list)
    hs: list[int] = field(default_factory=list)
    starts: list[int | None] = field(default_factory=list)

    def last_two(self) -> list[int]:
        """The last two tokens before the next step (the header check needs them)."""
        return (self.base_tail + self.tokens[-2:])[-2:]

    def truncate(self, n: int) -> None:
        """Forget the steps after the first `n`."""
        for xs in (self.tokens, self.targets, self.hs, self.starts):
            del xs[n:]
