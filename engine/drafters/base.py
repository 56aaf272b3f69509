"""The drafter interface and the registry that builds one from a run configuration."""

from collections.abc import Sequence
from typing import Any, Protocol

from engine.backend import Backend, SeqState
from engine.config import RunConfig
from engine.errors import ConfigError


class Drafter(Protocol):
    """Proposes up to `k` tokens to follow a slot's committed tokens."""

    name: str

    def propose(
        self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
    ) -> list[int]:
        """Draft tokens to follow `tokens` (the slot's committed tokens); `state` is the
        target's live state at position len(tokens) - 1. An empty list means no draft."""

    def on_commit(self, drafted: int, accepted: int) -> None:
        """Feedback after the round that verified this drafter's proposal."""

    def new_request(self) -> None:
        """A new request (turn) begins in the slot."""

    def stats(self) -> dict[str, int]:
        """Numbers worth recording with each draft (its own state's position...)."""


class BaseDrafter:
    """No-op defaults for drafters without feedback, state or statistics."""

    def on_commit(self, drafted: int, accepted: int) -> None:
        """Nothing to learn."""

    def new_request(self) -> None:
        """Nothing to reset."""

    def stats(self) -> dict[str, int]:
        """Nothing to report."""
        return {}


class ChainDrafter(BaseDrafter):
    """Several drafters in order of precedence (`ngram-mod,mtp`): the first that has a
    draft drafts; feedback goes to the one that drafted. `mtp` and `draft-model` always
    draft, so a member named after either never runs (`mtp,ngram-mod` is `mtp` alone)."""

    def __init__(self, drafters: Sequence[Drafter]) -> None:
        self.drafters = list(drafters)
        self.name = ",".join(d.name for d in drafters)
        # The member whose draft the last `propose` returned (None: nobody drafted).
        self.used: Drafter | None = None

    def propose(
        self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
    ) -> list[int]:
        """The first non-empty draft."""
        for d in self.drafters:
            draft = d.propose(backend, state, tokens, k)
            if draft:
                self.used = d
                return draft
        self.used = None
        return []

    def on_commit(self, drafted: int, accepted: int) -> None:
        """Forward feedback to the drafter that drafted."""
        if self.used is not None:
            self.used.on_commit(drafted, accepted)

    def new_request(self) -> None:
        """Every drafter hears of it."""
        for d in self.drafters:
            d.new_request()

    def stats(self) -> dict[str, int]:
        """Everyone's numbers."""
        return {key: value for d in self.drafters for key, value in d.stats().items()}


def _one(name: str, config: RunConfig, slot: int, shared: dict[str, Any]) -> Drafter:
    from engine.drafters.ngram import HashPool, NgramMapK, NgramMod, NgramParams, NgramSimple
    from engine.drafters.synthetic import SyntheticDrafter

    params = NgramParams(n=config.ngram_n, m=config.draft_max, draft_min=config.draft_min,
                         min_hits=config.ngram_min_hits)
    match name:
        case "synthetic":
            return SyntheticDrafter(config.acceptance, config.seed, slot,
                                    greedy=config.temperature == 0)
        case "ngram-simple":
            return NgramSimple(params)
        case "ngram-map-k":
            return NgramMapK(params)
        case "ngram-mod":
            pool = shared.setdefault("ngram-mod", HashPool(params.pool_size))
            return NgramMod(params, pool)
        case "mtp":
            from engine.drafters.mtp import MtpDrafter
            from engine.hybrid.backend import TorchBackend
            from engine.hybrid.mtp import load_mtp

            if "mtp" not in shared:
                backend = shared.get("backend")
                if not isinstance(backend, TorchBackend):
                    raise ConfigError("drafter: 'mtp' drafts from the loaded target's MTP "
                                      "head, which only the torch backend has")
                # The head's weights come from the target's checkpoint; the embedding
                # and LM head are the loaded target's own (no second load).
                shared["mtp"] = load_mtp(backend.checkpoint.path, backend.model)
            return MtpDrafter(shared["mtp"], compiled=config.compile)
        case "draft-model":
            from engine.drafters.draft_model import DraftModelDrafter
            from engine.hybrid.device import resolve_device, torch_dtype
            from engine.hybrid.loader import load_checkpoint

            if "draft-model" not in shared:
                shared["draft-model"] = load_checkpoint(
                    config.draft_model, dtype=torch_dtype(config.dtype),
                    device=resolve_device(config.device)).model.eval()
            return DraftModelDrafter(shared["draft-model"],
                                     keep_checkpoints=config.draft_checkpoints == "keep",
                                     compiled=config.compile)
    raise ConfigError(f"drafter: '{name}' is not available on the {config.backend} backend")


def make_drafter(config: RunConfig, slot: int, shared: dict[str, Any]) -> Drafter | None:
    """The configured drafter for `slot`, or None for plain decoding. `shared` holds what
    all slots of a session share: the backend under "backend" (the MTP head binds to its
    loaded target), ngram-mod's pool, the loaded drafters."""
    names = config.drafter_names
    if names == ("none",):
        return None
    drafters = [_one(n, config, slot, shared) for n in names]
    return drafters[0] if len(drafters) == 1 else ChainDrafter(drafters)
