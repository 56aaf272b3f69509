"""The drafter registry: the drafter a run configuration names, built for one slot.

Apart from `base.py`, which every drafter imports: the registry imports every drafter, so
in one module the two would draw a circle. The torch drafters load late, so a sim run
never imports torch.
"""

from collections.abc import Callable
from typing import Any

from engine.config import RunConfig
from engine.drafters.base import ChainDrafter, Drafter
from engine.drafters.ngram import HashPool, NgramMapK, NgramMod, NgramParams, NgramSimple
from engine.drafters.synthetic import SyntheticDrafter
from engine.errors import ConfigError

Builder = Callable[[RunConfig, int, dict[str, Any]], Drafter]
"""Builds one drafter for a slot from the run's configuration and what the session's slots
share."""


def _params(config: RunConfig) -> NgramParams:
    return NgramParams(n=config.ngram_n, m=config.draft_max, draft_min=config.draft_min,
                       min_hits=config.ngram_min_hits)


def _synthetic(config: RunConfig, slot: int, shared: dict[str, Any]) -> Drafter:
    return SyntheticDrafter(config.acceptance, config.seed, slot, greedy=config.temperature == 0)


def _ngram_simple(config: RunConfig, slot: int, shared: dict[str, Any]) -> Drafter:
    return NgramSimple(_params(config))


def _ngram_map_k(config: RunConfig, slot: int, shared: dict[str, Any]) -> Drafter:
    return NgramMapK(_params(config))


def _ngram_mod(config: RunConfig, slot: int, shared: dict[str, Any]) -> Drafter:
    params = _params(config)
    return NgramMod(params, shared.setdefault("ngram-mod", HashPool(params.pool_size)))


def _mtp(config: RunConfig, slot: int, shared: dict[str, Any]) -> Drafter:
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


def _draft_model(config: RunConfig, slot: int, shared: dict[str, Any]) -> Drafter:
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


BUILDERS: dict[str, Builder] = {
    "synthetic": _synthetic,
    "ngram-simple": _ngram_simple,
    "ngram-map-k": _ngram_map_k,
    "ngram-mod": _ngram_mod,
    "mtp": _mtp,
    "draft-model": _draft_model,
}
"""Every drafter by the name a run configuration gives it: a new drafter is its module and
one entry here."""


def _one(name: str, config: RunConfig, slot: int, shared: dict[str, Any]) -> Drafter:
    build = BUILDERS.get(name)
    if build is None:
        raise ConfigError(f"drafter: '{name}' is not available on the {config.backend} backend")
    return build(config, slot, shared)


def make_drafter(config: RunConfig, slot: int, shared: dict[str, Any]) -> Drafter | None:
    """The configured drafter for `slot`, or None for plain decoding. `shared` holds what
    all slots of a session share: the backend under "backend" (the MTP head binds to its
    loaded target), ngram-mod's pool, the loaded drafters."""
    names = config.drafter_names
    if names == ("none",):
        return None
    drafters = [_one(n, config, slot, shared) for n in names]
    return drafters[0] if len(drafters) == 1 else ChainDrafter(drafters)
