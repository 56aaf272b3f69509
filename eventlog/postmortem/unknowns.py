"""The checks a session's source could not feed, said rather than passed in silence.

A session imported from another engine's log (llama-server) stores which payload fields
its source provides (`config["provides"]`, adapters/llama/ledger/provenance.py). Where a detector's
input is missing there, its silence means nothing, so this detector names what was not
checked, and why, in one note. Our own sessions store no `provides`: their logs hold
every field, and this detector says nothing about them.
"""

from typing import Any

from eventlog.postmortem.advice import ADVICE
from eventlog.postmortem.detector import Handler, Row
from eventlog.postmortem.finding import Finding, Kind, Severity
from fsm.payloads import Begin
from fsm.states import Trigger

T = Trigger


def skipped_checks(provides: dict[str, Any], drafter: str, draft_state_sized: bool,
                   sampler_claimed: bool = False) -> dict[str, str]:
    """Each check the source cannot feed, with the reason (pure)."""
    out: dict[str, str] = {}
    if sampler_claimed and not provides.get("sampler", False):
        out["sampler"] = ("the sampler the session records is checked against the one the "
                          "server logs for each request, which it does only with -v")
    if not provides.get("digests"):
        out["state_truth"] = ("the state-truth audit (invariant 2) compares state digests, "
                              "which this source does not record; contamination is judged "
                              "from the rollback structure alone")
    if not provides.get("rounds"):
        out["rounds"] = ("stray tokens behind EOG, restore storms, replay livelocks and "
                         "acceptance collapse need the speculative rounds, which this log "
                         "does not show (run llama-server with -v)")
    if not provides.get("context_checkpoints"):
        out["history_reprefill"] = ("context-checkpoint restores are not logged without -v, "
                                    "so history re-prefill is not measured")
    if "draft-model" in drafter.split(",") and not draft_state_sized:
        out["draft_checkpoint_discard"] = (
            "whether context checkpoints hold the draft model's state shows only against "
            "the size of speculative checkpoints, which this log does not have")
    return out


class UnknownInputs:
    """Notes whether the source sized the draft model's checkpoints; reports the rest
    from the stored `provides`."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.provides: dict[str, Any] | None = config.get("provides")
        self.drafter = str(config.get("drafter") or "")
        self.sampler_claimed = config.get("sampler") is not None
        self.engine = config.get("engine", "the source")
        self.draft_state_sized = False

    def handlers(self) -> dict[Trigger, Handler]:
        """BEGIN, for whether the source sized the draft model's share; nothing for a
        session without `provides` (our own), whose BEGINs could change no finding."""
        return {} if self.provides is None else {T.BEGIN: self._on_begin}

    def _on_begin(self, _: Row, begin: Begin) -> None:
        if begin.get("draft_bytes"):
            self.draft_state_sized = True

    def finish(self) -> list[Finding]:
        """One note naming every check left undone, if any."""
        if self.provides is None:
            return []
        skipped = skipped_checks(self.provides, self.drafter, self.draft_state_sized,
                                 self.sampler_claimed)
        if not skipped:
            return []
        return [Finding(
            Kind.CHECK_SKIPPED, Severity.INFO, 0, 0,
            f"Not checked, for lack of input from {self.engine}'s log: "
            + "; ".join(f"{name}: {why}" for name, why in skipped.items()) + ".",
            ADVICE[Kind.CHECK_SKIPPED],
            {"skipped": sorted(skipped), "provides": self.provides})]
