"""The golden grid: the named sessions whose events pin the engine's behaviour.

The sim grid is every strategy x drafter, with the EOG-policy axis where it can matter,
plus near-ties under reverify (livelocks) and early EOGs. The EOG policy only decides what
happens to accepted drafts behind an EOG inside a block (engine/speculative.py
`accepted_block`), so the axis is dropped for the drafters that never put one there on the
sim: `none` drafts nothing (and then no strategy has anything to roll back either: one
cell stands for all eight), and `ngram-mod` never finds a continuation in the sim's target,
a hash chain over 32,000 ids that never repeats itself: it drafted nothing in any round of
these sessions, so every round is a one-token decode whose EOG is the block's last token,
where truncate and legacy are the same by construction. `dropped` keeps those sessions
with the cell that stands for each; a test checks they still repeat it, so the axis comes
back the day it starts to pin something. The EOG policy under an n-gram drafter is pinned
by the torch grid instead, where real text repeats.
"""

from engine.config import BackendKind, EogPolicy, ReplayPolicy, RunConfig, Strategy

_SIM = dict(backend=BackendKind.SIM, turns=3, prompt_tokens=96, question_tokens=12,
            answer_tokens=48, seed=3)
# On the CPU wherever it runs: a GPU's kernels round differently again, and the machine
# key (parts.py) names a CPU's.
_TORCH = dict(backend=BackendKind.TORCH, device="cpu", turns=2, max_answer_tokens=24, seed=1)
PLAIN = f"{Strategy.CHECKPOINT.value}/{EogPolicy.TRUNCATE.value}/none"


def _cell(strategy: Strategy, eog: EogPolicy, drafter: str) -> tuple[str, RunConfig]:
    name = f"{strategy.value}/{eog.value}/{drafter}"
    return name, RunConfig(strategy=strategy, eog_policy=eog, drafter=drafter, **_SIM)


def grid() -> dict[str, RunConfig]:
    """Named sim configurations (names as the grid has always had them)."""
    out: dict[str, RunConfig] = dict([_cell(Strategy.CHECKPOINT, EogPolicy.TRUNCATE, "none")])
    for strategy in Strategy:
        for eog in EogPolicy:
            out.update([_cell(strategy, eog, "synthetic")])
        out.update([_cell(strategy, EogPolicy.TRUNCATE, "ngram-mod")])
        out[f"{strategy.value}/reverify-ties"] = RunConfig(
            strategy=strategy, replay_policy=ReplayPolicy.REVERIFY, tie_flip_rate=0.3,
            drafter="synthetic", **_SIM)
        out[f"{strategy.value}/early-eog"] = RunConfig(
            strategy=strategy, eog_prob=0.05, drafter="synthetic", slots=2, **_SIM)
    return out


def dropped() -> dict[str, tuple[RunConfig, str]]:
    """The sessions the grid leaves out, each with the cell whose events it repeats."""
    out: dict[str, tuple[RunConfig, str]] = {}
    for strategy in Strategy:
        name, config = _cell(strategy, EogPolicy.LEGACY, "ngram-mod")
        out[name] = (config, _cell(strategy, EogPolicy.TRUNCATE, "ngram-mod")[0])
        for eog in EogPolicy:
            name, config = _cell(strategy, eog, "none")
            if name != PLAIN:
                out[name] = (config, PLAIN)
    return out


def torch_grid() -> dict[str, RunConfig]:
    """Named torch configurations (the shipped model)."""
    out = {f"torch/{s.value}/mtp": RunConfig(strategy=s, drafter="mtp", **_TORCH)
           for s in (Strategy.CHECKPOINT, Strategy.PER_TOKEN, Strategy.INPUT_REPLAY)}
    # Seed 2's second answer ends inside an accepted n-gram block with a token behind the
    # EOG, which legacy keeps (a stray token) and truncate cuts: the policy is pinned here.
    # No audit: the cells above pin the state, this one the policy (at a third the time).
    out["torch/checkpoint/ngram-mod/legacy"] = RunConfig(
        strategy=Strategy.CHECKPOINT, drafter="ngram-mod", eog_policy=EogPolicy.LEGACY,
        audit=False, **{**_TORCH, "seed": 2, "max_answer_tokens": 64})
    return out
