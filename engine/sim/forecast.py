"""An acceptance pattern replayed through a cost profile: what a session's rounds would
take on another machine, decoded plainly and speculatively with each of llama.cpp's ways
of undoing a rejected draft.

A round is what a recorded round keeps: its context, the drafts it verified and how many
the target accepted. Its time is charged the way llama-server spends it
(tools/server/server-context.cpp, docs/design.md#llama-checkpoints):

- `HOST`: a whole-state checkpoint before the verify, in host memory (llama.cpp's
  default, `LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY`; on an APU host memory is the same
  memory), and on a reject the checkpoint restored and the kept tokens decoded again;
- `DEVICE`: the same with the checkpoint beside the live state
  (`LLAMA_STATE_SEQ_FLAGS_ON_DEVICE`);
- `ROLLBACK`: per-position recurrent states written by the verify (`n_rs_seq` >= the
  draft): no checkpoint, a reject selects a kept state on the device;
- `PLAIN`: the same tokens one forward each.

Only `ROLLBACK` keeps per-position states, as many as the pattern's largest draft
(llama.cpp sets `n_rs_seq` to the draft size): its forwards pay their fixed cost
(`CostProfile.keeping`), the other modes' forwards keep none.

Drafting costs `draft_share` of a one-token forward per drafted token (0 for an n-gram
lookup); the sim's own drafters are free, so this term is the forecast's alone.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from engine.sim.costs import CostProfile, Placement

MTP_DRAFT_SHARE = 0.23
"""A built-in draft head's (MTP) cost per drafted token, as a share of a one-token
forward: 5.62 ms against 24.69 ms, Qwen3.5-27B Q8_0 on two RTX 3090s
(https://github.com/ikawrakow/ik_llama.cpp/pull/1698)."""


class Mode(StrEnum):
    """How a forecast decodes the pattern's tokens."""

    PLAIN = "plain"
    HOST = "host"
    DEVICE = "device"
    ROLLBACK = "n_rs_seq"


@dataclass(frozen=True)
class Round:
    """One round of a pattern: `ctx` tokens cached before it, `drafted` drafts verified,
    `accepted` of them kept (the round yields `accepted + 1` tokens)."""

    ctx: int
    drafted: int
    accepted: int


@dataclass(frozen=True)
class Forecast:
    """Tokens a pattern yields and the seconds each `Mode` takes to decode them."""

    tokens: int
    seconds: dict[Mode, float]

    def tok_s(self, mode: Mode) -> float:
        """Decode tokens/s under `mode`."""
        s = self.seconds[mode]
        return self.tokens / s if s > 0 else 0.0

    def speedup(self, mode: Mode) -> float:
        """Tokens/s under `mode` over plain decoding's."""
        plain = self.tok_s(Mode.PLAIN)
        return self.tok_s(mode) / plain if plain > 0 else 0.0


def recut(rounds: Iterable[Round], draft_max: int) -> list[Round]:
    """The pattern as a drafter capped at `draft_max` drafts would have made it: each
    round drafts at most `draft_max` and keeps at most as many (the same drafts, cut)."""
    if draft_max < 0:
        raise ValueError(f"draft_max must be >= 0, got {draft_max}")
    return [replace(r, drafted=min(r.drafted, draft_max), accepted=min(r.accepted, draft_max))
            for r in rounds]


def placed(profile: CostProfile, mode: Mode) -> CostProfile:
    """`profile` with its checkpoints where `mode` keeps them: the device for `DEVICE`,
    host memory for `HOST` (unified memory stays so: on an APU the host is the device's
    memory)."""
    if mode is Mode.DEVICE:
        return replace(profile, checkpoint_place=Placement.DEVICE.value)
    if mode is Mode.HOST and profile.checkpoint_place == Placement.DEVICE.value:
        return replace(profile, checkpoint_place=Placement.HOST.value)
    return profile


def round_s(profile: CostProfile, r: Round, mode: Mode, draft_share: float = 0.0) -> float:
    """Seconds of one round under a speculative `mode` (`profile` already `placed`)."""
    if r.drafted == 0:
        return profile.verify_s(1, r.ctx)
    seconds = (profile.verify_s(r.drafted + 1, r.ctx)
               + r.drafted * draft_share * profile.forward_s(1, r.ctx))
    rejected = r.accepted < r.drafted
    if mode is Mode.ROLLBACK:
        select = profile.copy_s() if rejected else 0.0
        return seconds + profile.intermediate_write_s(r.drafted + 1) + select
    checkpoint = profile.checkpoint_s()
    seconds += checkpoint  # saved before the verify
    if rejected:  # restored, and the kept tokens decoded again
        seconds += checkpoint + profile.forward_s(r.accepted + 1, r.ctx)
    return seconds


def plain_s(profile: CostProfile, r: Round) -> float:
    """Seconds of decoding a round's tokens one forward each."""
    return sum(profile.verify_s(1, r.ctx + i) for i in range(r.accepted + 1))


def forecast(profile: CostProfile, rounds: Sequence[Round], draft_share: float = 0.0,
             weights: Sequence[float] | None = None) -> Forecast:
    """The pattern `rounds` (each counted `weights[i]` times; once without) under every
    `Mode` of `profile`."""
    w = [1.0] * len(rounds) if weights is None else list(weights)
    if len(w) != len(rounds):
        raise ValueError(f"{len(w)} weights for {len(rounds)} rounds")
    tokens = sum(wi * (r.accepted + 1) for wi, r in zip(w, rounds, strict=True))
    plain = profile.keeping(0)
    kept = profile.keeping(max((r.drafted for r in rounds), default=0))
    seconds = {Mode.PLAIN: sum(wi * plain_s(plain, r)
                               for wi, r in zip(w, rounds, strict=True))}
    for mode in (Mode.HOST, Mode.DEVICE, Mode.ROLLBACK):
        p = placed(kept if mode is Mode.ROLLBACK else plain, mode)
        seconds[mode] = sum(wi * round_s(p, r, mode, draft_share)
                            for wi, r in zip(w, rounds, strict=True))
    return Forecast(round(tokens), seconds)


def bisect(f: Callable[[float], float], lo: float, hi: float, steps: int) -> float:
    """The root of `f`, which falls from positive at `lo` to negative at `hi`, after
    `steps` halvings."""
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return (lo + hi) / 2


def expected_rounds(draft: int, acceptance: float, ctx: int) -> tuple[list[Round], list[float]]:
    """Rounds of `draft` drafts whose drafts are each kept with one probability until the
    first miss, chosen so that the kept share of all drafts is `acceptance`; with the
    probability of each count of kept drafts as its weight."""
    if not 0.0 <= acceptance <= 1.0 or draft < 1:
        raise ValueError(f"need 1+ drafts and an acceptance in [0, 1], got {draft}, "
                         f"{acceptance}")

    def kept_share(q: float) -> float:
        return sum(q ** j for j in range(1, draft + 1)) / draft

    # kept_share rises with q: bisect to the asked acceptance
    q = bisect(lambda x: acceptance - kept_share(x), 0.0, 1.0, steps=60)
    probs = [q ** j * (1 - q) for j in range(draft)] + [q ** draft]
    rounds = [Round(ctx=ctx, drafted=draft, accepted=j) for j in range(draft + 1)]
    return rounds, probs
