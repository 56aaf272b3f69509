"""The drafter registry: the drafter a run configuration names, built for one slot.

Apart from `base.py`, which every drafter imports: the registry imports every drafter, so
in one module the two would draw a circle. The torch drafters load late, so a sim run
never imports torch.
"""

from typing import Any

from engine.config import RunConfig
from engine.drafters.base import ChainDrafter, Drafter
from engine.drafters.ngram import HashPool, NgramMapK, NgramMod, NgramParams, NgramSimple
from engine.drafters.synthetic import SyntheticDrafter
from engine.errors import ConfigError


def _one(name: str, config: RunConfig, slot: int, shared: dict[str, Any]) -> Drafter:
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
