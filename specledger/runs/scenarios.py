"""`specledger scenario NAME`: record a session that reproduces a known bug, show that its
postmortem names it, and that the counterfactual with the fix is clean.

Each scenario plants its bug with settings only (no engine patches), so the recorded
session re-executes like any other and the fix is one `--set` away.
"""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.config import RunConfig
from engine.shipped import model_dir
from eventlog.postmortem import Kind, Severity
from fsm.errors import SpecledgerError

if TYPE_CHECKING:
    from eventlog.postmortem import Postmortem
    from specledger.runs.rerun import RerunResult


class ScenarioError(SpecledgerError):
    """A scenario cannot run here (unknown name, unsupported backend, missing model)."""


@dataclass(frozen=True)
class Scenario:
    """A bug planted by `planted` settings, which the postmortem must report as `kind`,
    and removed by the `fix` settings. `reference`: also record a plain run of the same
    conversation, so that the output itself can be checked."""

    name: str
    bug: str
    kind: Kind
    planted: dict[str, Any]
    fix: dict[str, Any]
    backends: tuple[str, ...]
    reference: bool = False
    why_not: dict[str, str] = field(default_factory=dict)


SCENARIOS = {s.name: s for s in (
    Scenario("eog-tail", "llama.cpp #28049: accepted drafts behind EOG stay in the slot and the "
             "next turn re-prefills the previous answer", Kind.EOG_STRAY_TOKENS,
             {"eog_policy": "legacy"}, {"eog_policy": "truncate"}, ("sim", "torch")),
    Scenario("replay-livelock", "llama.cpp #28060: a replay that re-verifies under "
             "batch-shape-dependent numerics restores the same checkpoint without progress",
             Kind.REPLAY_LIVELOCK,
             {"strategy": "checkpoint", "replay_policy": "reverify", "tie_flip_rate": 0.3},
             {"replay_policy": "reconstruct"}, ("sim",),
             why_not={"torch": "it needs positions whose argmax depends on the batch shape, "
                               "which the sim plants with --tie-flip-rate; use --backend sim"}),
    Scenario("no-rollback", "seed 004 (DotLLM): rejected drafts stay in the recurrent state",
             Kind.STATE_CONTAMINATION, {"strategy": "none"}, {"strategy": "checkpoint"},
             ("sim", "torch"), reference=True),
    Scenario("draft-ckpt-discard", "llama.cpp PR 22521: draft-model checkpoints discarded at "
             "every request, so the draft model recomputes the conversation",
             Kind.DRAFT_CHECKPOINT_DISCARD,
             {"drafter": "draft-model", "draft_checkpoints": "discard"},
             {"draft_checkpoints": "keep"}, ("torch",),
             why_not={"sim": "the sim has no draft model (its drafters are synthetic and "
                             "n-gram); use --backend torch with a draft model"}),
)}

_SIM_BASE = RunConfig(drafter="synthetic", acceptance=0.9, draft_max=8, turns=3,
                      prompt_tokens=256, question_tokens=16, answer_tokens=200)
_TORCH_BASE = {"backend": "torch", "turns": 3, "draft_max": 6, "max_answer_tokens": 192}


@dataclass(frozen=True)
class ScenarioRun:
    """What a scenario recorded and found."""

    scenario: Scenario
    config: RunConfig
    reference: int | None
    bug: "Postmortem"
    fixed: "RerunResult"
    fixed_postmortem: "Postmortem"

    @property
    def reproduced(self) -> bool:
        """The postmortem of the planted session names the bug."""
        return any(f.kind is self.scenario.kind for f in self.bug.findings)

    @property
    def fixed_clean(self) -> bool:
        """The counterfactual with the fix has no error and not the bug."""
        pm = self.fixed_postmortem
        return not pm.has(Severity.ERROR) and not any(
            f.kind is self.scenario.kind for f in pm.findings)


def scenario_config(s: Scenario, backend: str, seed: int, model: str | None,
                    draft_model: str | None, settings: dict[str, Any] | None = None
                    ) -> RunConfig:
    """The planted configuration of scenario `s` on `backend`, with `settings` (sizes,
    drafter...) applied before the planted ones."""
    config = _base(s, backend, seed, model, draft_model)
    return config.replace(**{**(settings or {}), **s.planted})


def _base(s: Scenario, backend: str, seed: int, model: str | None,
          draft_model: str | None) -> RunConfig:
    if backend not in s.backends:
        raise ScenarioError(f"scenario {s.name} does not run on the {backend} backend: "
                            f"{s.why_not.get(backend, 'unsupported')}")
    if backend == "sim":
        return _SIM_BASE.replace(seed=seed)
    defaults = RunConfig()
    paths = {"model": model or defaults.model,
             "draft_model": draft_model or defaults.draft_model}
    for key, path in paths.items():
        if not model_dir(path).is_dir():
            raise ScenarioError(f"scenario {s.name} on torch needs a checkpoint directory at "
                                f"{path} (--{key.replace('_', '-')} DIR)")
    return defaults.replace(**{**_TORCH_BASE, **paths, "seed": seed, "drafter": "draft-model"})


def run_scenario(name: str, db: str, backend: str = "sim", seed: int = 1,
                 model: str | None = None, draft_model: str | None = None,
                 settings: dict[str, Any] | None = None) -> ScenarioRun:
    """Record scenario `name`, its postmortem, and its fixed counterfactual's."""
    # Here, not at the top: the table above names the CLI's choices, which must not load
    # the engine and the ledger.
    from eventlog import open_db
    from eventlog.postmortem import postmortem_session
    from specledger.api import run_session
    from specledger.runs.rerun import rerun

    s = SCENARIOS.get(name)
    if s is None:
        raise ScenarioError(f"no scenario '{name}' (known: {', '.join(SCENARIOS)})")
    config = scenario_config(s, backend, seed, model, draft_model, settings)
    ref = run_session(config.replace(drafter="none"), db).session_id if s.reference else None
    bug = run_session(config, db, parent_id=ref).session_id
    engine = open_db(db, create=False)
    fixed = rerun(db, bug, s.fix)
    return ScenarioRun(s, config, ref, postmortem_session(engine, bug, ref), fixed,
                       postmortem_session(engine, fixed.session, ref))
