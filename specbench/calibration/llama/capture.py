"""The llama-server logs `specledger calibrate`'s cross-validation fits and predicts
(specbench/calibration/llama/logs.py): fresh verbose servers of each setting (a drafter
chain and a draft size) through the same held-out conversations.

Each conversation has two turns, the second sent with the first turn's history and
`cache_prompt`, so the server processes only what it does not hold: its log carries
prompt forwards of a few tokens, of a turn's answer and question, and of a whole first
prompt, beside the decode rounds; the forward's cost as a function of its batch
(adapters/llama/calibration/curve.py) is measured over all of them.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.llama.server.paths import DEFAULT_BUILD
from engine.config import RunConfig
from specbench.calibration.llama.measure import server_options
from specbench.calibration.llama.recipe import DRAFT, P_MIN, recipe_flags


@dataclass(frozen=True)
class Setting:
    """A server's drafter chain (ours), draft size and the MTP head's `--spec-draft-p-min`
    (None: llama.cpp's default, every round drafts the full size)."""

    drafter: str
    draft: int
    p_min: float | None = None

    @property
    def label(self) -> str:
        """How tables name it."""
        if self.drafter == "none":
            return self.drafter
        p_min = "" if self.p_min is None else f" p-min {self.p_min:g}"
        return f"{self.drafter} k={self.draft}{p_min}"


RECIPE = Setting("mtp", DRAFT, P_MIN)
"""The recommended fit log (specbench/calibration/llama/recipe.py)."""
SETTINGS = (RECIPE, Setting("none", 8), Setting("mtp", 2), Setting("mtp", 4),
            Setting("mtp", 8), Setting("ngram-mod", 4), Setting("ngram-mod", 8),
            Setting("ngram-simple", 8), Setting("ngram-mod,mtp", 4))
"""Every setting the suite logs; each log is a fit, and each fit predicts every other."""


@dataclass(frozen=True)
class Plan:
    """Conversations per server (two turns each), the answer cap, runs per setting."""

    prompts: int
    tokens: int
    repeat: int


# a server is a second or two; the median of 9 runs outvotes the stalls of a machine
# shared with other jobs (one run to the next moves by up to 2x there)
FULL = Plan(prompts=3, tokens=96, repeat=9)
QUICK = Plan(prompts=1, tokens=48, repeat=1)


def log_paths(s: Setting, logs: Path, repeat: int) -> list[Path]:
    """Where the runs of setting `s` write their logs."""
    p_min = "" if s.p_min is None else f"-p{s.p_min:g}"
    return [logs / f"{s.drafter}-k{s.draft}{p_min}-{i}.log" for i in range(repeat)]


@dataclass(frozen=True)
class Conversation:
    """A held-out conversation of two turns: the first prompt and the follow-up question
    (its prompt is the first turn's history, answer included, and this question)."""

    first: list[int]
    follow_up: list[int]


def conversations(config: RunConfig, checkpoint: Any) -> list[Conversation]:
    """Each slot's held-out conversation (`config.slots` of them, two turns each)."""
    from engine.conversation import HeldOutConversation
    from engine.hybrid.backend import template_for

    template, held = template_for(checkpoint.tokenizer), HeldOutConversation(config)
    return [Conversation(template.next_prompt([], held.question(slot, 1)),
                         held.question(slot, 2)) for slot in range(config.slots)]


def run_setting(s: Setting, model: str, talks: list[Conversation], template: Any, plan: Plan,
                threads: int, log: Path, device: str = "cpu", build: str = DEFAULT_BUILD
                ) -> None:
    """A fresh verbose server of setting `s` (`build`'s; its CUDA server on `device` cuda)
    through every conversation, logging to `log`. The second turn keeps the slot's cache
    (`cache_prompt`), so its prompt is processed from where the first turn left off."""
    from adapters.llama.gguf.export import cached_gguf
    from adapters.llama.server.process import LlamaServer

    config = RunConfig(backend="torch", model=model, drafter=s.drafter, draft_max=s.draft,
                       max_answer_tokens=plan.tokens, audit=False, device=device,
                       llama_build=build)
    options = server_options(config, cached_gguf(model, build=build), threads)(s.drafter, True)
    extra = [] if s.p_min is None else recipe_flags(s.p_min)
    with LlamaServer(options, log, extra) as server:
        for talk in talks:
            answer = server.client.complete(talk.first, plan.tokens, cache_prompt=True)
            follow = template.next_prompt([*talk.first, *answer.tokens], talk.follow_up)
            server.client.complete(follow, plan.tokens, cache_prompt=True)
