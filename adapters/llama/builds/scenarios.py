"""The scenario that triggers each known incident (adapters/llama/builds/incidents.py) on
the shipped models on a CPU, and how a recorded session of it is judged.

A scenario is a `specledger run --backend llama` configuration (drafter, turns, answer cap,
draft length, seed); the client sends the history back verbatim, as our run does (an
edited history re-prefills on every build: the divergence leaves no checkpoint to keep,
so it tells no build from another). `bench incidents` runs every scenario on every
built build of the matrix; the verdict of one (incident, build) cell is one of `Verdict`.
"""

from dataclasses import dataclass, replace
from enum import StrEnum

from adapters.llama.builds.incidents import Incident
from adapters.llama.builds.matrix import Build, Exposure
from engine.config import RunConfig


class Verdict(StrEnum):
    """What one scenario on one build showed."""

    NAMED = "named"                    # the postmortem names the incident, with numbers
    CLEAN = "clean"                    # the scenario ran; no such finding
    NOT_ON_CPU = "not reproducible on CPU"  # ran; the incident needs another backend
    ABSENT = "absent in this build"    # the build lacks the code (or refuses the drafter)
    NOT_BUILT = "not built"            # no llama-server of this build in the cache
    FAILED = "failed"                  # the run itself failed (a crash is a finding too)
    NOT_RUN = "not run (--quick)"      # a smoke run leaves it out


@dataclass(frozen=True)
class Scenario:
    """One incident's run: `from_turn` is the first turn that can show it (the second
    request, for what a request inherits from the one before); `draft_self` runs the
    target as its own draft model (a hybrid draft, which every build loads); `measure` is
    the finding's number that must be above 0 for the incident to be named (a finding
    that measured nothing names nothing)."""

    incident: str
    drafter: str
    turns: int
    max_answer_tokens: int
    draft_max: int
    seed: int = 0
    from_turn: int = 1
    measure: str | None = None
    draft_self: bool = False
    why: str = ""

    def config(self, build: str, *, model: str | None = None,
               draft_model: str | None = None) -> RunConfig:
        """The run of this scenario on llama.cpp `build` (greedy)."""
        cfg = RunConfig(backend="llama", drafter=self.drafter, turns=self.turns,
                        max_answer_tokens=self.max_answer_tokens, draft_max=self.draft_max,
                        seed=self.seed, llama_build=build)
        if model is not None:
            cfg = cfg.replace(model=model)
        if self.draft_self:
            cfg = cfg.replace(draft_model=cfg.model)
        elif draft_model is not None:
            cfg = cfg.replace(draft_model=draft_model)
        return cfg

    @property
    def run_key(self) -> tuple[object, ...]:
        """Scenarios with the same key are one run (their findings read from one
        session)."""
        return (self.drafter, self.turns, self.max_answer_tokens, self.draft_max, self.seed,
                self.draft_self)

    def command(self, build: str) -> str:
        """The command line that records this scenario's session."""
        return (f"specledger run --backend llama --llama-build {build} --drafter "
               f"{self.drafter} --turns {self.turns} --max-answer-tokens "
               f"{self.max_answer_tokens} --draft-max {self.draft_max} --seed {self.seed}"
               + (" --draft-model <the target>" if self.draft_self else ""))


SCENARIOS: dict[str, Scenario] = {s.incident: s for s in (
    Scenario("#28049", "ngram-mod", turns=3, max_answer_tokens=512, draft_max=8, from_turn=2,
             measure="stray_tokens",
             why="ngram-mod learns `<|im_end|>` from the history and drafts it inside a block "
                 "from the second answer on"),
    Scenario("PR 22521", "draft-model", turns=3, max_answer_tokens=64, draft_max=4, from_turn=2,
             draft_self=True,
             why="the target as its own draft model (hybrid: its context checkpoints its state; "
                 "the shipped draft model is one no build before 0.3.36 loads): at each new "
                 "request of the slot, that checkpoint kept or dropped"),
    Scenario("PR 26320", "ngram-mod", turns=2, max_answer_tokens=64, draft_max=8,
             measure="restores",
             why="partial acceptances on a FULL-rollback target: restores and their replays"),
    Scenario("#23268", "ngram-mod", turns=3, max_answer_tokens=256, draft_max=32,
             why="long drafts: the replay's batch differs most from the first verification's"),
    Scenario("#28060", "ngram-mod", turns=3, max_answer_tokens=256, draft_max=32,
             why="the same run as #23268: a replay that never verifies as the first did"),
    Scenario("#24055", "none", turns=3, max_answer_tokens=64, draft_max=8, from_turn=2,
             measure="reprefill_tokens",
             why="the history sent back verbatim: the whole cache matches the next prompt, so "
                 "no checkpoint needs restoring; a build that restores one re-prefills the "
                 "previous answer"),
)}
"""Per incident key (every incident of adapters/llama/builds/incidents.py has one)."""

QUICK = ("PR 26320",)
"""The smoke run's scenarios: one short run."""


def quick_scenario(s: Scenario) -> Scenario:
    """`s` at smoke size (fewer, shorter turns)."""
    return replace(s, turns=2, max_answer_tokens=min(32, s.max_answer_tokens))


def absent_reason(incident: Incident, build: Build) -> str:
    """Why `build` cannot run into `incident` (its exposure is absent)."""
    if "spec_checkpoints" in incident.needs and not build.spec_checkpoints:
        return "no speculative checkpoints (speculation on a hybrid target is refused)"
    missing = [n for n in incident.drafters if n not in build.spec_types]
    if missing:
        return f"no {', '.join(missing)} drafter"
    return f"the code the incident is about is not in this build ({incident.bug_code.pattern})"


def expected(build: Build, incident: Incident) -> Verdict:
    """What the build's source says the scenario should show."""
    exposure = build.exposures.get(incident.key, Exposure.ABSENT)
    if exposure is Exposure.ABSENT:
        return Verdict.ABSENT
    if exposure is Exposure.FIXED:
        return Verdict.CLEAN
    return Verdict.NOT_ON_CPU if incident.cpu else Verdict.NAMED
