"""A test double of `engine.backend.Backend`: the target's next token is a function of the
last token and its position, the recurrent state a digest chained over the consumed
tokens (it cannot be trimmed, so a rollback that forgets it shows in the audit)."""

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.backend import Capabilities, Keep, VerifyOut
from engine.template import ChatTemplate
from fsm.invariants import Audit

VOCAB = 64  # ordinary tokens; the chat specials follow
TEMPLATE = ChatTemplate(im_start=64, im_end=65, end_of_text=66, nl=(67,), user=(68,),
                        assistant=(69,))


def target(last: int, position: int) -> int:
    """The target's token after `last` at `position`: an answer ends now and then."""
    return TEMPLATE.im_end if position % 29 == 0 else (5 * last + position % 7) % VOCAB


def chain(h: int, tokens: Sequence[int]) -> int:
    """The recurrent digest `h` after `tokens`."""
    for tok in tokens:
        h = (h * 1_000_003 + tok + 1) % (1 << 61)
    return h


@dataclass
class DoubleState:
    """Consumed tokens (the attention part, trimmable) and their digest `h`."""

    kv: list[int] = field(default_factory=list)
    h: int = 0

    @property
    def position(self) -> int:
        """Tokens consumed."""
        return len(self.kv)


class DoubleBackend:
    """Every state operation of `engine.backend.Backend` (documented there) in a few lines,
    and the oracle; `corrupt_restore` flips a bit of the digest on every restore."""

    name, clock, template = "double", "simulated", TEMPLATE

    def __init__(self, corrupt_restore: bool = False) -> None:
        self.corrupt_restore = corrupt_restore
        self.capabilities = Capabilities(oracle=self)
        self._t = 0.0

    def _consume(self, s: DoubleState, tokens: Sequence[int]) -> None:
        self._t += 1e-3 * len(tokens)  # the clock: a millisecond a token
        s.kv.extend(tokens)
        s.h = chain(s.h, tokens)

    def peek(self, s: DoubleState, tokens: Sequence[int]) -> list[int]:
        return [target(tok, s.position + i + 1) for i, tok in enumerate(tokens)]

    def continuation(self, s: DoubleState, last: int, n: int) -> list[int]:
        out = [last]
        for i in range(n):
            out.append(target(out[-1], s.position + i + 1))
        return out[1:]

    def now(self) -> float:
        return self._t

    def new_state(self) -> DoubleState:
        return DoubleState()

    def reset(self, s: DoubleState) -> None:
        s.kv, s.h = [], 0

    def prefill(self, s: DoubleState, tokens: Sequence[int]) -> int:
        return self.forward(s, tokens)[-1]

    def forward(self, s: DoubleState, tokens: Sequence[int]) -> list[int]:
        targets = self.peek(s, tokens)
        self._consume(s, tokens)
        return targets

    def verify(self, s: DoubleState, batch: Sequence[int], keep: Keep) -> VerifyOut:
        targets, pos0, h0 = self.peek(s, batch), s.position, s.h
        if keep is Keep.INPUTS:  # KV written, the recurrence left for later
            s.kv.extend(batch)
            return VerifyOut(targets, (pos0, h0, list(batch)))
        hs = [chain(h0, batch[:i + 1]) for i in range(len(batch))]
        self._consume(s, batch)
        return VerifyOut(targets, (pos0, hs) if keep is Keep.PER_TOKEN else None)

    def snapshot(self, s: DoubleState) -> tuple[int, int]:
        return s.position, s.h

    def restore(self, s: DoubleState, snap: tuple[int, int]) -> None:
        del s.kv[snap[0]:]
        s.h = snap[1] ^ 1 if self.corrupt_restore else snap[1]

    def select(self, s: DoubleState, kept: tuple[int, list[int]], index: int) -> None:
        del s.kv[kept[0] + index + 1:]
        s.h = kept[1][index]

    def replay_inputs(self, s: DoubleState, kept: tuple[int, int, list[int]], n: int) -> None:
        pos0, s.h, batch = kept
        del s.kv[pos0:]
        self._consume(s, batch[:n])

    def trim(self, s: DoubleState, position: int) -> None:
        del s.kv[position:]

    def kv_length(self, s: DoubleState) -> int:
        return len(s.kv)

    def digest(self, s: DoubleState) -> str:
        return f"{s.h:016x}"

    def audit(self, s: DoubleState, tokens: Sequence[int]) -> Audit:
        h = chain(0, tokens[:s.position])
        return Audit(ok=h == s.h, expected_digest=f"{h:016x}", error=float(h != s.h))

    def state_bytes(self) -> int:
        return 8
