"""The known llama.cpp incidents specledger looks for in real builds: what each is, which
finding names it, which builds can run into it, and how a build's source shows the bug or
its fix (`tools/llama_matrix.py` checks every build of the matrix against these).

A source signature is a pattern in one vendored file: `bug_code` is present where the
code the incident is about is (a build without it cannot run into it: too old, or before
the change that brought the regression), and `fix_code`, where an upstream fix was
merged, is present only once the fix is in.
"""

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from adapters.llama.builds.matrix import Exposure

BUILD_FLAGS = ("spec_checkpoints", "chains")
"""The needs that are build facts (builds.json booleans); every other need is a drafter."""
SERVER = "tools/server/server-context.cpp"
SPECULATIVE = "common/speculative.cpp"


@dataclass(frozen=True)
class Code:
    """A pattern (a regular expression) in one vendored file."""

    file: str
    pattern: str

    def found(self, text: Callable[[str], str]) -> bool:
        """Whether the pattern occurs in the file, read through `text(file)`."""
        return re.search(self.pattern, text(self.file)) is not None


@dataclass(frozen=True)
class Incident:
    """One known incident. `key` is how llama.cpp's tracker names it; `finding` the
    postmortem finding kind that names it; `needs` the build facts it needs (drafters by
    our name, `spec_checkpoints`, `chains`); `cpu` why it cannot happen on a CPU, if so."""

    key: str
    title: str
    finding: str
    needs: tuple[str, ...]
    bug_code: Code
    fix_code: Code | None
    fix: str
    cpu: str | None = None

    @property
    def drafters(self) -> tuple[str, ...]:
        """The drafters (our names) among `needs`; the rest are BUILD_FLAGS."""
        return tuple(n for n in self.needs if n not in BUILD_FLAGS)


REUSE = r"we have a previous \(partial\) draft to reuse"
"""The restore-and-replay path of speculative checkpoints (PR 19493): after a partial
acceptance the slot restores its checkpoint and re-submits the accepted tokens."""

INCIDENTS: tuple[Incident, ...] = (
    Incident(
        key="#28049", title="accepted tokens behind an EOG, then the answer re-prefilled",
        finding="eog_stray_tokens", needs=("spec_checkpoints",),
        bug_code=Code(SERVER, r"prompt\.tokens\.insert\(\{ids\.begin\(\), ids\.end\(\) - 1\}\)"),
        fix_code=None,
        fix="PR 28232 (open): truncate the accepted block at its first EOG before rollback"),
    Incident(
        key="PR 22521", title="draft-model checkpoints discarded at each request",
        finding="draft_checkpoint_discard", needs=("spec_checkpoints", "draft-model"),
        bug_code=Code(SPECULATIVE, r"delete checkpoint, prompt\.size="),
        fix_code=Code(SERVER, r"spec_ckpt\.update_dft\("),
        fix="PR 22521 (merged 2026-04): the draft context's state joins the slot's checkpoints"),
    Incident(
        key="PR 26320", title="acceptance inflated by the correction token of each restore",
        finding="acceptance_inflation", needs=("spec_checkpoints",),
        bug_code=Code(SERVER, REUSE),
        fix_code=Code(SERVER, r"if \(slot\.spec_is_replay && n_accepted > 0\)"),
        fix="PR 26320 (merged 2026-08): a replayed step's correction token is not counted"),
    Incident(
        key="#23268", title="ngram-mod re-uses a failed draft after a restore and loops",
        finding="restore_storm", needs=("spec_checkpoints", "ngram-mod"),
        bug_code=Code(SERVER, REUSE), fix_code=None,
        fix="PR 25819 (open, a mitigation): detect the loop and break out of it",
        cpu="the loop needs a replay whose verification disagrees with the first one: "
            "logits that depend on the batch shape (reported on CUDA)"),
    Incident(
        key="#28060", title="replay re-verification livelock",
        finding="replay_livelock", needs=("spec_checkpoints",),
        bug_code=Code(SERVER, REUSE), fix_code=None,
        fix="PR 28061 (closed): accept the replayed tokens without verifying them again",
        cpu="needs logits that depend on the batch shape (reported on Vulkan); on a CPU "
            "the replay verifies as the first verification did"),
    Incident(
        key="#24055", title="context checkpoints invalidated on hybrid models: re-prefill",
        finding="history_reprefill", needs=(),
        bug_code=Code(SERVER, r"near_prompt_end"),
        fix_code=Code(SERVER, r"\[TAG_CHECKPOINTS_FIX_POS_MIN\]"),
        fix="PR 24411's [TAG_CHECKPOINTS_FIX_POS_MIN] (in 0.3.30) stops restoring a "
            "checkpoint of a history the cache still matches; PR 25592 (open) restores a "
            "hybrid checkpoint at an exact position of the common prefix"),
)


def exposure(incident: Incident, build: Mapping[str, object],
             text: Callable[[str], str]) -> Exposure:
    """What one build's facts (`build`, as builds.json holds them) and source (`text(file)`)
    say of `incident`."""
    offered = set(build["spec_types"])  # type: ignore[call-overload]
    if (any(not build[n] for n in incident.needs if n in BUILD_FLAGS)
            or not offered.issuperset(incident.drafters)):
        return Exposure.ABSENT
    if incident.fix_code is not None and incident.fix_code.found(text):
        return Exposure.FIXED
    return Exposure.BUG if incident.bug_code.found(text) else Exposure.ABSENT


def by_key(key: str) -> Incident:
    """The incident named `key` (KeyError names the known ones)."""
    for incident in INCIDENTS:
        if incident.key == key:
            return incident
    raise KeyError(f"unknown incident {key!r}; known: {', '.join(i.key for i in INCIDENTS)}")
