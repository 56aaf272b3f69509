"""What a specledger-owned llama-server runs with: one typed, validated options record, and
the pure mapping from it to llama-server's command line.

Our drafter names map onto llama.cpp's speculative types (common/speculative.cpp): `mtp`
is `draft-mtp` (the target GGUF's nextn head), `draft-model` is `draft-simple` with the
draft GGUF (`-md`), and the n-gram drafters keep their names. Our sizes map onto each
type's own flags (common/arg.cpp): the draft length of the model drafters is
`--spec-draft-n-max/-n-min`, ngram-simple's and ngram-map-k's is their m-gram
(`--spec-ngram-*-size-m`, key length `-size-n`), ngram-mod's `--spec-ngram-mod-n-max/-n-min`
(key length `-n-match`).

A chain of drafters runs in llama.cpp's own order of precedence, whatever order
`--spec-type` names them in (common_speculative_init: the n-gram drafters first, then the
model drafters): each round it asks them in that order and the first with a draft drafts.
A chain in another order would not run as named, so it is refused.

Builds before 0.3.24 speak an older dialect (adapters/llama/builds/matrix.py `Dialect.LEGACY`): one
speculative type, no draft-mtp, a draft model implied by `-md`, and shared sizes
(`--draft-max/--draft-min`, `--spec-ngram-size-n/-m`, `--spec-ngram-min-hits`; ngram-mod's
key length is `--spec-ngram-size-n`).
"""

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from adapters.llama.builds.matrix import Dialect
from adapters.llama.server.paths import DEFAULT_BUILD, check_build
from adapters.process import HOST
from engine.config import RunConfig, check_setting
from engine.errors import ConfigError


class CacheType(StrEnum):
    """The KV cache's element type (llama.cpp's default: f16)."""

    F32 = "f32"
    F16 = "f16"


class Drafter(StrEnum):
    """A drafter that llama-server implements, by our name for it."""

    NONE = "none"
    MTP = "mtp"
    DRAFT_MODEL = "draft-model"
    NGRAM_SIMPLE = "ngram-simple"
    NGRAM_MAP_K = "ngram-map-k"
    NGRAM_MOD = "ngram-mod"


# common/speculative.cpp, common_speculative_init: "this list here defines the priority".
PRECEDENCE = (Drafter.NGRAM_SIMPLE, Drafter.NGRAM_MAP_K, Drafter.NGRAM_MOD,
              Drafter.DRAFT_MODEL, Drafter.MTP)


class ChainOrderError(ConfigError):
    """A drafter chain llama-server would not run in the order it names."""


class BuildLacksDrafterError(ConfigError):
    """The chosen llama.cpp build has no such drafter, or runs no chain."""


# llama.cpp's speculative type of each drafter: the n-gram drafters keep their names.
SPEC_TYPES = {d: d.value for d in Drafter if d is not Drafter.NONE} | {
    Drafter.MTP: "draft-mtp", Drafter.DRAFT_MODEL: "draft-simple"}


_OURS = {spec: ours for ours, spec in SPEC_TYPES.items()}
# Builds before 0.3.24 name the types with underscores, the draft model `draft`.
_OURS |= {spec.replace("-", "_"): ours for spec, ours in _OURS.items()}
_OURS["draft"] = Drafter.DRAFT_MODEL


def our_drafter(spec_type: str) -> str:
    """Our name for one of llama.cpp's speculative types, as any build of the matrix
    spells it (its own name if we have none)."""
    ours = _OURS.get(spec_type)
    return ours.value if ours is not None else spec_type


def parse_drafters(spec: str) -> tuple[Drafter, ...]:
    """Our `--drafter` value (`none`, a name, or a comma-separated chain) as Drafters."""
    names = [n.strip() for n in spec.split(",")]
    try:
        chain = tuple(Drafter(n) for n in names)
    except ValueError:
        known = ", ".join(d.value for d in Drafter)
        raise ConfigError(f"drafter: '{spec}' is not 'none' or a chain of {known} (the "
                          f"drafters llama-server has)") from None
    if Drafter.NONE in chain and len(chain) > 1:
        raise ConfigError(f"drafter: '{spec}' chains 'none' with a drafter")
    if chain == (Drafter.NONE,):
        return ()
    check_chain_order(chain)
    return chain


def check_chain_order(chain: tuple[Drafter, ...]) -> None:
    """Refuse a chain llama-server would not run as named: a drafter named twice, or an
    order other than its precedence (which it would silently use instead)."""
    named = ",".join(d.value for d in chain)
    twice = sorted({d.value for d in chain if chain.count(d) > 1})
    if twice:
        raise ChainOrderError(f"drafter: '{named}' names {', '.join(twice)} twice")
    honoured = tuple(sorted(chain, key=PRECEDENCE.index))
    if honoured != chain:
        order = ",".join(d.value for d in honoured)
        raise ChainOrderError(
            f"drafter: llama-server tries its drafters in a fixed order "
            f"({', '.join(d.value for d in PRECEDENCE)}), so '{named}' would run as "
            f"'{order}': pass --drafter {order}")


@dataclass(frozen=True)
class ServerOptions:
    """A llama-server run: the target GGUF, the drafter chain (empty: no speculation) and
    its sizes, threads, context, and how to start. `port` 0 lets the server pick a free
    loopback port; `verbose` (-v) makes its log show every speculative round; `metrics`
    serves Prometheus counters at `/metrics` (0.3.36 counts its verify steps there).

    The defaults compute as our f32 engine does: an f32 KV cache and no flash attention
    (llama.cpp's defaults are f16 and `auto`; its CPU flash attention rounds to f16
    whatever the cache type). Measured on the shipped target over 1,448 greedy positions,
    the top-2 logit gap then differs from ours by at most 1.1e-5, against 5.7e-3 with
    llama.cpp's defaults."""

    model: Path
    drafters: tuple[Drafter, ...] = ()
    draft_model: Path | None = None
    draft_max: int = 8
    draft_min: int = 0
    ngram_n: int = 4
    ngram_min_hits: int = 1
    ctx_checkpoints: int = 8
    ctx_size: int = 4096
    cache_type: CacheType = CacheType.F32
    flash_attn: bool = False
    threads: int = 1
    port: int = 0
    verbose: bool = True
    metrics: bool = False
    startup_timeout_s: float = 60.0
    build: str = DEFAULT_BUILD
    cuda: bool = False
    """Run the build's CUDA server (`specledger llama build VERSION --cuda`), every layer
    of the target and the draft model on the GPU."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", Path(self.model))
        object.__setattr__(self, "drafters", tuple(Drafter(d) for d in self.drafters))
        check_chain_order(self.drafters)
        object.__setattr__(self, "cache_type", CacheType(self.cache_type))
        if self.draft_model is not None:
            object.__setattr__(self, "draft_model", Path(self.draft_model))
        if not self.model.is_file():
            raise ConfigError(f"model: GGUF file {self.model} does not exist (make one with "
                              f"`specledger export gguf`)")
        if Drafter.DRAFT_MODEL in self.drafters and (self.draft_model is None
                                                     or not self.draft_model.is_file()):
            raise ConfigError(f"draft_model: drafter draft-model needs the draft GGUF file, "
                              f"got {self.draft_model}")
        check_setting("draft_max", self.draft_max)
        for name, lo, hi in (("draft_min", 0, self.draft_max), ("ngram_n", 1, 1024),
                             ("ngram_min_hits", 1, 1 << 16), ("ctx_checkpoints", 0, 1 << 16),
                             ("ctx_size", 16, 1 << 20), ("threads", 1, 1024), ("port", 0, 65535)):
            value = getattr(self, name)
            if not isinstance(value, int) or not lo <= value <= hi:
                raise ConfigError(f"{name}: {value!r} must be an integer between {lo} and {hi}")
        check_build(self.build)
        if not self.startup_timeout_s > 0:
            raise ConfigError(f"startup_timeout_s: {self.startup_timeout_s} must be > 0")

    @classmethod
    def from_run_config(cls, config: RunConfig, model: Path, draft_model: Path | None = None,
                        *, threads: int = 1, verbose: bool = True) -> "ServerOptions":
        """The llama-server counterpart of a run configuration's drafter and sizes."""
        return cls(model=model, drafters=parse_drafters(config.drafter),
                   draft_model=draft_model, draft_max=config.draft_max,
                   draft_min=config.draft_min, ngram_n=config.ngram_n,
                   ngram_min_hits=config.ngram_min_hits,
                   ctx_checkpoints=config.ctx_checkpoints, threads=threads, verbose=verbose,
                   build=config.llama_build, cuda=config.device == "cuda")


def server_args(opts: ServerOptions, port: int,
                dialect: Dialect = Dialect.SPEC_DRAFT) -> list[str]:
    """llama-server's arguments (binary excluded) for `opts` listening on `port`, in the
    flag dialect of the build that runs them."""
    threads = str(opts.threads)
    args = ["-m", str(opts.model), "--host", HOST, "--port", str(port),
            "-t", threads, "-tb", threads, "-c", str(opts.ctx_size), "-np", "1",
            "--ctx-checkpoints", str(opts.ctx_checkpoints), "--no-webui",
            "--cache-type-k", opts.cache_type.value, "--cache-type-v", opts.cache_type.value,
            "--flash-attn", "on" if opts.flash_attn else "off"]
    if opts.verbose:  # every round, each line on the log's own clock (`calibrate` reads it)
        args += ["-v", "--log-timestamps", "--log-prefix"]
    if opts.metrics:
        args.append("--metrics")
    if opts.cuda:  # every build's default is `auto` or a count; a number works on all
        args += ["-ngl", "999"]
        if Drafter.DRAFT_MODEL in opts.drafters:
            args += ["-ngld", "999"]
    if dialect is Dialect.LEGACY:
        return args + _legacy_args(opts)
    if opts.drafters:
        args += ["--spec-type", ",".join(SPEC_TYPES[d] for d in opts.drafters)]
    for d in opts.drafters:
        args += _drafter_args(opts, d)
    return args


def _drafter_args(opts: ServerOptions, drafter: Drafter) -> list[str]:
    """The sizing flags of one drafter."""
    n, m, lo = str(opts.ngram_n), str(opts.draft_max), str(opts.draft_min)
    if drafter in (Drafter.MTP, Drafter.DRAFT_MODEL):
        # The draft context (the MTP head's too) has its own KV cache type.
        args = ["--spec-draft-n-max", m, "--spec-draft-n-min", lo,
                "--spec-draft-type-k", opts.cache_type.value,
                "--spec-draft-type-v", opts.cache_type.value]
        if drafter is Drafter.DRAFT_MODEL:
            args += ["-md", str(opts.draft_model), "--spec-draft-threads", str(opts.threads),
                     "--spec-draft-threads-batch", str(opts.threads)]
        return args
    if drafter is Drafter.NGRAM_MOD:
        return ["--spec-ngram-mod-n-match", n, "--spec-ngram-mod-n-max", m,
                "--spec-ngram-mod-n-min", lo]
    prefix = "--spec-ngram-simple" if drafter is Drafter.NGRAM_SIMPLE else "--spec-ngram-map-k"
    return [f"{prefix}-size-n", n, f"{prefix}-size-m", m,
            f"{prefix}-min-hits", str(opts.ngram_min_hits)]


def _legacy_args(opts: ServerOptions) -> list[str]:
    """The drafter flags of a build before 0.3.24: one type, shared sizes."""
    if not opts.drafters:
        return []
    named = ",".join(d.value for d in opts.drafters)
    if len(opts.drafters) > 1:
        raise BuildLacksDrafterError(f"drafter: llama.cpp {opts.build} runs one speculative "
                                     f"type, not the chain '{named}' (chains came in 0.3.24)")
    drafter = opts.drafters[0]
    if drafter is Drafter.MTP:
        raise BuildLacksDrafterError(f"drafter: llama.cpp {opts.build} has no draft-mtp "
                                     f"(it came in 0.3.24); choose draft-model or an n-gram "
                                     f"drafter")
    sizes = ["--draft-max", str(opts.draft_max), "--draft-min", str(opts.draft_min)]
    if drafter is Drafter.DRAFT_MODEL:  # -md alone selects the draft-model type
        threads, cache = str(opts.threads), opts.cache_type.value
        return [*sizes, "-md", str(opts.draft_model), "-ctkd", cache, "-ctvd", cache,
                "-td", threads, "-tbd", threads]
    return ["--spec-type", SPEC_TYPES[drafter], *sizes,
            "--spec-ngram-size-n", str(opts.ngram_n),
            "--spec-ngram-size-m", str(opts.draft_max),
            "--spec-ngram-min-hits", str(opts.ngram_min_hits)]
