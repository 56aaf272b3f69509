"""Context checkpoints that do not hold the draft model's state (llama.cpp PR 22521, as an
engine's log shows it when it reports checkpoint sizes rather than recomputed tokens).

A recurrent draft model has a state of its own. When a new request falls back to a
context checkpoint, the draft state must come back with the target's, so a context
checkpoint must be as large as a speculative checkpoint, which saves both (llama-server
logs `size` and its `draft` share for each; the ledger records them as `bytes` and
`draft_bytes`). A smaller one lost the draft's share: every restore of it leaves the draft
model to rebuild its state over the history. Sizes are logged in MiB to 3 decimals, so a
shortfall of half the draft share or less is not told from rounding.
"""

from typing import Any

from eventlog.postmortem.advice import CAUSE_ADVICE, Cause
from eventlog.postmortem.detector import Handler, Row, examples
from eventlog.postmortem.finding import Finding, Kind, Noted, Severity
from fsm.payloads import Begin, CtxRestore, CtxSave
from fsm.states import Trigger

T = Trigger


class DraftStateSizes:
    """The largest speculative checkpoint with a draft share, against each context
    checkpoint; counts the context restores that the shortfall made expensive."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.drafter = config.get("drafter", "?")
        self.spec: tuple[int, int] | None = None  # (bytes, draft_bytes)
        self.saves: list[Noted] = []  # each context checkpoint, its size the detail
        self.restores = 0

    def handlers(self) -> dict[Trigger, Handler]:
        """BEGIN sizes the speculative checkpoint; CTX_SAVE and CTX_RESTORE the context's."""

        def on_begin(_: Row, begin: Begin) -> None:
            # Every round's BEGIN comes here; most have no draft share (no draft model).
            draft = begin.get("draft_bytes", 0)
            if draft and (self.spec is None or begin["bytes"] > self.spec[0]):
                self.spec = (begin["bytes"], draft)

        return {T.BEGIN: on_begin, T.CTX_SAVE: self._on_save,
                T.CTX_RESTORE: self._on_restore}

    def _on_save(self, row: Row, save: CtxSave) -> None:
        if save["bytes"]:
            self.saves.append(Noted(*row[:4], save["bytes"]))

    def _on_restore(self, _: Row, restore: CtxRestore) -> None:
        if not restore["reset"]:
            self.restores += 1

    def finish(self) -> list[Finding]:
        """A warning when context checkpoints miss the draft model's share."""
        if self.spec is None:
            return []
        full, draft = self.spec
        short = [e for e in self.saves if e.detail < full - draft / 2]
        if not short:
            return []
        first = short[0]
        return [Finding(
            Kind.DRAFT_CHECKPOINT_DISCARD, Severity.WARNING, first.seq, short[-1].seq,
            f"{len(short)} of {len(self.saves)} context checkpoint(s) are smaller than a "
            f"speculative checkpoint ({first.detail} against {full} bytes, of which "
            f"{draft} are the draft model's state): they do not hold the draft model's "
            f"state, so each of the {self.restores} context restore(s) in this session "
            f"left the draft model (drafter {self.drafter}) to rebuild it over the history.",
            CAUSE_ADVICE[Cause.DRAFT_STATE_NOT_SAVED],
            {"short_checkpoints": len(short), "checkpoints": len(self.saves),
             "checkpoint_bytes": first.detail, "speculative_bytes": full,
             "draft_bytes": draft, "context_restores": self.restores,
             "per_checkpoint": examples([{"seq": e.seq, "slot": e.slot, "turn": e.turn,
                                          "bytes": e.detail} for e in short])},
            first.slot, first.turn, first.round)]
