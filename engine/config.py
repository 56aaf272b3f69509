"""The run configuration: one typed dataclass, validated once at the edge."""

from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

from engine.errors import ConfigError


class BackendKind(StrEnum):
    """Which engine runs the model."""

    SIM = "sim"
    TORCH = "torch"


class Strategy(StrEnum):
    """How rejected drafts are taken out of the recurrent state (DESIGN.md table)."""

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


DRAFTERS = ("none", "synthetic", "ngram-simple", "ngram-map-k", "ngram-mod", "draft-model", "mtp")
DEFAULT_DRAFTER = {"sim": "synthetic", "torch": "mtp"}
SIM_DRAFTERS = ("none", "synthetic", "ngram-simple", "ngram-map-k", "ngram-mod")


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a session; stored whole with the session so it can be
    re-executed. Lengths are in tokens."""

    backend: BackendKind = BackendKind.SIM
    strategy: Strategy = Strategy.CHECKPOINT
    eog_policy: EogPolicy = EogPolicy.TRUNCATE
    replay_policy: ReplayPolicy = ReplayPolicy.RECONSTRUCT
    drafter: str = ""  # empty: the backend's default drafter (DEFAULT_DRAFTER)
    draft_max: int = 8
    draft_min: int = 0
    ngram_n: int = 4
    ngram_min_hits: int = 1
    acceptance: float = 0.7
    turns: int = 3
    slots: int = 1
    prompt_tokens: int = 1024
    question_tokens: int = 32
    answer_tokens: int = 512
    max_answer_tokens: int = 0
    eog_prob: float = 0.0
    tie_flip_rate: float = 0.0
    seed: int = 0
    profile: str = "qwen3.5-27b-h200"
    model: str = "models/target"
    draft_model: str = "models/draft"
    draft_checkpoints: str = "keep"
    kernels: str = "auto"
    device: str = "auto"
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    ctx_checkpoints: int = 8
    ctx_checkpoint_every: int = 4096
    livelock_guard: int = 3
    audit: bool = True
    strict: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(f.type, type) and issubclass(f.type, StrEnum):
                try:
                    object.__setattr__(self, f.name, f.type(value))
                except ValueError:
                    choices = ", ".join(m.value for m in f.type)
                    raise ConfigError(f"{f.name}: '{value}' is not one of {choices}") from None
        if not self.drafter:
            object.__setattr__(self, "drafter", DEFAULT_DRAFTER[self.backend.value])
        self._check()

    def _check(self) -> None:
        _positive("draft_max", self.draft_max, lo=1, hi=64)
        _positive("draft_min", self.draft_min, lo=0, hi=self.draft_max)
        _positive("ngram_n", self.ngram_n, lo=1, hi=64)
        _positive("ngram_min_hits", self.ngram_min_hits, lo=1)
        _positive("turns", self.turns, lo=1)
        _positive("slots", self.slots, lo=1)
        _positive("prompt_tokens", self.prompt_tokens, lo=1)
        _positive("question_tokens", self.question_tokens, lo=1)
        _positive("answer_tokens", self.answer_tokens, lo=1)
        _positive("max_answer_tokens", self.max_answer_tokens, lo=0)
        _positive("ctx_checkpoints", self.ctx_checkpoints, lo=0)
        _positive("ctx_checkpoint_every", self.ctx_checkpoint_every, lo=1)
        _positive("livelock_guard", self.livelock_guard, lo=0)
        _positive("top_k", self.top_k, lo=0)
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"device: '{self.device}' is not auto, cpu or cuda")
        if self.kernels not in ("auto", "torch", "triton"):
            raise ConfigError(f"kernels: '{self.kernels}' is not auto, torch or triton")
        if self.draft_checkpoints not in ("keep", "discard"):
            raise ConfigError(f"draft_checkpoints: '{self.draft_checkpoints}' is not keep or "
                              "discard")
        if not isinstance(self.temperature, int | float) or self.temperature < 0:
            raise ConfigError(f"temperature: {self.temperature!r} must be >= 0")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"top_p: {self.top_p} must be in (0, 1]")
        for name in ("acceptance", "eog_prob", "tie_flip_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name}: {value} is not a probability in [0, 1]")
        names = self.drafter_names
        unknown = [n for n in names if n not in DRAFTERS]
        if unknown or ("none" in names and len(names) > 1):
            raise ConfigError(f"drafter: '{self.drafter}' is not 'none' or a comma-separated "
                              f"chain of {', '.join(DRAFTERS[1:])}")
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


def _positive(name: str, value: int, lo: int, hi: int | None = None) -> None:
    if not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise ConfigError(f"{name}: {value!r} must be an integer {bound}")
