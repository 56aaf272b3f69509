"""The run configuration: one typed dataclass, validated once at the edge."""

import math
import re
from dataclasses import Field, asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from engine.errors import ConfigError

DEFAULT_BUILD = "0.3.36"
"""The llama.cpp build `make llama` builds and every run uses unless told otherwise, named by
its llama-cpp-python version; adapters/llama/server/paths.py keeps the builds. Here, with
the option it is the default of, because the engine's floor lies below the adapters'."""
_VERSION = re.compile(r"\d+\.\d+\.\d+")


def is_version(build: object) -> bool:
    """Whether `build` names a llama-cpp-python version (X.Y.Z), as a build is named."""
    return isinstance(build, str) and _VERSION.fullmatch(build) is not None


class BackendKind(StrEnum):
    """Which engine runs the model."""

    SIM = "sim"
    TORCH = "torch"
    LLAMA = "llama"  # llama.cpp's llama-server on the models' GGUF export
    VLLM = "vllm"  # vLLM's OpenAI server (its CPU build) on the models' own directories


OBSERVED = frozenset({BackendKind.LLAMA, BackendKind.VLLM})
"""Third-party engines we start, drive and record (adapters/), not ours."""


class Strategy(StrEnum):
    """How rejected drafts leave the recurrent state (docs/design.md#rollback-strategies)."""

    CHECKPOINT = "checkpoint"
    PER_TOKEN = "per_token"
    INPUT_REPLAY = "input_replay"
    NONE = "none"


class EogPolicy(StrEnum):
    """Where an end-of-generation token inside an accepted block is enforced."""

    TRUNCATE = "truncate"
    LEGACY = "legacy"


class ReplayPolicy(StrEnum):
    """Whether a replay after restore reconstructs state or verifies again."""

    RECONSTRUCT = "reconstruct"
    REVERIFY = "reverify"


class Schedule(StrEnum):
    """How the slots' rounds share the target (docs/design.md#batched-schedule): one after
    another, each with its own forward, or one forward per step over every slot's drafts."""

    SEQUENTIAL = "sequential"
    BATCHED = "batched"


class DType(StrEnum):
    """The torch backend's weights and activations (the GDN recurrent state stays float32
    either way). bfloat16 is what vLLM's CPU build runs: a comparison with it in bfloat16
    is like for like."""

    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"


DRAFTERS = ("none", "synthetic", "ngram-simple", "ngram-map-k", "ngram-mod", "draft-model", "mtp")
DEFAULT_DRAFTER = {"sim": "synthetic", "torch": "mtp", "llama": "mtp", "vllm": "mtp"}
SIM_DRAFTERS = ("none", "synthetic", "ngram-simple", "ngram-map-k", "ngram-mod")
SHIPPED_TARGET = "shipped:target"
SHIPPED_DRAFT = "shipped:draft"
# vLLM's CPU kernels refuse the shipped target's head widths (attention 32: "Unexpected
# head dim size, 32"); the wide pair has the widths they accept.
DEFAULT_MODELS = {"vllm": ("shipped:wide", "shipped:wide-draft")}
"""A backend's target and draft model where they are not the shipped target and draft."""


def option(default: Any, help: str, *, lo: float | None = None, hi: float | None = None,
           above: float | None = None, choices: tuple[str, ...] = (),
           cli_default: Any = None, negate: str = "") -> Any:
    """A `RunConfig` field with what the CLI and the validation need to know of it: help,
    bounds (`lo <= v <= hi`, `v > above`), choices, a command-line default where it differs
    (`cli_default`) and, for a bool that is on by default, the flag that turns it off."""
    meta = {"help": help, "lo": lo, "hi": hi, "above": above, "choices": choices,
            "cli_default": cli_default, "negate": negate}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a session; stored whole with the session so it can be
    re-executed. Lengths are in tokens. The field metadata (see `option`) is the one
    source of the `specledger run` flags and of the range checks."""

    # The CLI runs the real engine by default; the sim stands in for hardware we lack.
    backend: BackendKind = option(BackendKind.SIM, "engine: torch (the shipped model), sim, "
                                  "llama (llama-server on its GGUF export) or vllm (vLLM's "
                                  "OpenAI server, `make vllm`)",
                                  cli_default=BackendKind.TORCH)
    strategy: Strategy = option(Strategy.CHECKPOINT, "how rejected drafts leave the state")
    eog_policy: EogPolicy = option(EogPolicy.TRUNCATE,
                                   "EOG inside an accepted block: truncate (the fix) or legacy")
    replay_policy: ReplayPolicy = option(ReplayPolicy.RECONSTRUCT,
                                         "after a restore: reconstruct, or verify again")
    drafter: str = option("", "none | synthetic | ngram-simple | ngram-map-k | ngram-mod | "
                              "draft-model | mtp, or a chain in order of precedence such as "
                              "ngram-mod,mtp (default: synthetic on sim, mtp on torch)")
    draft_max: int = option(8, "most draft tokens per round", lo=1, hi=64)
    draft_min: int = option(0, "drop shorter drafts (n-gram drafters)", lo=0, hi=64)
    ngram_n: int = option(4, "n-gram key length", lo=1, hi=64)
    ngram_min_hits: int = option(1, "ngram-map-k: repetitions a key needs before it drafts",
                                 lo=1)
    acceptance: float = option(0.7, "synthetic drafter: chance that each draft is the "
                                    "target's token", lo=0.0, hi=1.0)
    turns: int = option(3, "turns per conversation", lo=1)
    slots: int = option(1, "concurrent conversations", lo=1)
    schedule: Schedule = option(Schedule.SEQUENTIAL, "the slots' rounds: sequential (each "
                                "its own forward) or batched (one forward per step verifies "
                                "every slot's drafts)")
    prompt_tokens: int = option(1024, "first user message (sim)", lo=1)
    question_tokens: int = option(32, "later user messages (sim)", lo=1)
    answer_tokens: int = option(512, "answer length before EOG (sim)", lo=1)
    max_answer_tokens: int = option(0, "cut an answer without EOG here (0: 4x answer-tokens "
                                       "+ 64 on sim, 512 on torch)", lo=0)
    eog_prob: float = option(0.0, "chance of an early EOG per token (sim)", lo=0.0, hi=1.0)
    tie_flip_rate: float = option(0.0, "share of near-tie positions whose argmax depends on "
                                       "batch shape (sim)", lo=0.0, hi=1.0)
    seed: int = option(0, "seed of every random choice")
    profile: str = option("qwen3.5-27b-h200", "sim cost profile (engine/sim/profiles)")
    model: str = option("", "target checkpoint directory, or on llama its GGUF file "
                            "(default: shipped:target; on vllm shipped:wide)")
    draft_model: str = option("", "draft checkpoint directory, or on llama its GGUF file, "
                                  "drafter draft-model (default: shipped:draft; on vllm "
                                  "shipped:wide-draft)")
    draft_checkpoints: str = option("keep", "draft-model checkpoints across requests "
                                            "(discard: PR 22521's bug)",
                                    choices=("keep", "discard"))
    kernels: str = option("auto", "torch: GDN state kernels (auto: Triton on CUDA, torch "
                                  "references elsewhere); the resolved choice is recorded",
                          choices=("auto", "torch", "triton"))
    device: str = option("auto", "torch: where the models run (auto: CUDA when torch sees "
                                 "one), the resolved device recorded; llama: cuda runs "
                                 "the build's CUDA server (`llama build VERSION --cuda`)",
                         choices=("auto", "cpu", "cuda"))
    dtype: DType = option(DType.FLOAT32, "torch: the models' dtype (the target's, its MTP "
                                         "head's and the draft model's)")
    compile: bool = option(False, "torch: run the one-token steps (the target's, the draft "
                                  "model's, the MTP head's) through torch.compile (tens of "
                                  "seconds at a process's first step, then cached on disk; "
                                  "plain decode about 2x faster on a CPU)")
    threads: int = option(1, "torch: intra-op threads (the shipped model is tiny: one is "
                             "fastest, and far faster on a busy machine)", lo=1)
    temperature: float = option(0.0, "0: greedy verification; > 0: lossless rejection "
                                     "sampling", lo=0.0)
    top_k: int = option(0, "sample from the k likeliest tokens (0: all)", lo=0)
    top_p: float = option(1.0, "sample from the smallest set holding this much probability",
                          above=0.0, hi=1.0)
    ctx_checkpoints: int = option(8, "context checkpoints a slot keeps", lo=0)
    ctx_checkpoint_every: int = option(4096, "a context checkpoint every M prefill tokens",
                                       lo=1)
    livelock_guard: int = option(3, "restores at one position that count as a livelock "
                                    "(0: off)", lo=0)
    audit: bool = option(True, "skip the state-truth audit", negate="--no-audit")
    strict: bool = option(False, "stop at the first violation")
    stream: bool = option(False, "llama: stream each answer (server-sent events)")
    llama_build: str = option(DEFAULT_BUILD, "llama: the llama.cpp build that runs, by its "
                                        "llama-cpp-python version (`specledger llama builds` "
                                        "lists the matrix)")

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(f.type, type) and issubclass(f.type, StrEnum):
                try:
                    object.__setattr__(self, f.name, f.type(value))
                except ValueError:
                    choices = ", ".join(m.value for m in f.type)
                    raise ConfigError(f"{f.name}: '{value}' is not one of {choices}") from None
        target, draft = DEFAULT_MODELS.get(self.backend.value, (SHIPPED_TARGET, SHIPPED_DRAFT))
        defaults = {"drafter": DEFAULT_DRAFTER[self.backend.value], "model": target,
                    "draft_model": draft}
        for name, default in defaults.items():
            if not getattr(self, name):
                object.__setattr__(self, name, default)
        self._check()

    def _check(self) -> None:
        for f in fields(self):
            _check_field(f, getattr(self, f.name))
        if self.draft_min > self.draft_max:
            raise ConfigError(f"draft_min: {self.draft_min} must not exceed draft_max "
                              f"({self.draft_max})")
        names = self.drafter_names
        unknown = [n for n in names if n not in DRAFTERS]
        if unknown or ("none" in names and len(names) > 1):
            raise ConfigError(f"drafter: '{self.drafter}' is not 'none' or a comma-separated "
                              f"chain of {', '.join(DRAFTERS[1:])}")
        if not is_version(self.llama_build):
            raise ConfigError(f"llama_build: '{self.llama_build}' is not a llama-cpp-python "
                              f"version such as {DEFAULT_BUILD}")
        if self.schedule is Schedule.BATCHED and self.backend in OBSERVED:
            raise ConfigError(f"schedule: {self.backend}'s server batches its requests "
                              f"itself; run the {self.backend} backend with --schedule "
                              "sequential")
        if self.backend is BackendKind.SIM and any(n not in SIM_DRAFTERS for n in names):
            raise ConfigError(
                f"drafter: '{self.drafter}' needs a model; on the sim backend choose from "
                f"{', '.join(SIM_DRAFTERS)}"
            )

    @property
    def drafter_names(self) -> tuple[str, ...]:
        """The drafter chain, in order of precedence."""
        return tuple(n.strip() for n in self.drafter.split(","))

    @property
    def answer_cap(self) -> int:
        """Most tokens a turn may generate before it is cut without EOG (a real model
        decides its own answer length; the sim's is `answer_tokens`)."""
        if self.max_answer_tokens:
            return self.max_answer_tokens
        return 4 * self.answer_tokens + 64 if self.backend is BackendKind.SIM else 512

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able mapping (stored with the session)."""
        return {k: (v.value if isinstance(v, StrEnum) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        """Inverse of `to_dict`; unknown keys are an error, missing ones take defaults."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(unknown)}")
        return cls(**data)

    def replace(self, **changes: Any) -> "RunConfig":
        """A copy with `changes` applied and validated."""
        return RunConfig.from_dict({**self.to_dict(), **changes})


def check_setting(name: str, value: Any) -> None:
    """Refuse `value` (ConfigError) where `RunConfig`'s field `name` would: its type, bounds
    and choices, declared once, for another component's copy of the setting."""
    _check_field(next(f for f in fields(RunConfig) if f.name == name), value)


def _check_field(f: Field[Any], value: Any) -> None:
    problem = out_of_bounds(f, value)
    if problem:
        raise ConfigError(f"{f.name}: {problem}")


def out_of_bounds(f: Field[Any], value: Any) -> str:
    """Why `value` is not allowed in field `f` (its type, bounds and choices), or ''."""
    meta = f.metadata
    kind = f.type
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        return f"{value!r} must be an integer"
    if kind is float and (isinstance(value, bool) or not isinstance(value, int | float)):
        return f"{value!r} must be a number"
    # NaN passes every comparison below, and a stored NaN or infinity is not JSON a
    # re-execution can read back: refuse both here, where every path to a config meets.
    if kind is float and not math.isfinite(value):
        return f"{value!r} must be a finite number"
    if kind is bool and not isinstance(value, bool):
        return f"{value!r} must be true or false"
    lo, hi, above = meta.get("lo"), meta.get("hi"), meta.get("above")
    if (lo is not None and value < lo) or (hi is not None and value > hi) or (
            above is not None and value <= above):
        low = f"above {above}" if above is not None else f"at least {lo}"
        return f"{value!r} must be {low}" + (f" and at most {hi}" if hi is not None else "")
    choices = meta.get("choices") or ()
    if choices and value not in choices:
        return f"'{value}' is not one of {', '.join(choices)}"
    return ""
