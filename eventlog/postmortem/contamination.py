"""Recurrent-state contamination (seed 004: DotLLM's missing GDN rollback).

Attention KV is addressed by position, so a rejected draft's entry is simply unreachable;
a recurrent state has absorbed the rejected tokens and keeps them unless the round rolls
it back. The log shows this twice: a round that goes from reject straight to commit with
rejected tokens in its verify batch, and a state-truth violation (the digest after commit
is not the digest of the committed tokens). The finding names the round where it began.
"""

from typing import Any

from eventlog.postmortem.advice import ADVICE
from eventlog.postmortem.detector import SEQ, SLOT, SOURCE, Handler, Row, examples
from eventlog.postmortem.finding import Finding, Kind, Noted, Severity
from fsm.invariants import Invariant
from fsm.payloads import Commit, InvariantViolation, Verify
from fsm.states import RoundState, Trigger

T = Trigger


class Contamination:
    """Counts no-rollback commits and state-truth violations; keeps the first of each."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.strategy = config.get("strategy", "?")
        self.audit = bool(config.get("audit", True))
        self._batch: dict[int, int] = {}
        self.unrolled: list[Noted] = []
        self.absorbed = 0
        self.violations: list[Noted] = []
        self.last_seq = 0

    def handlers(self) -> dict[Trigger, Handler]:
        """VERIFY's batch, the COMMIT after it, and state-truth violations."""
        batches = self._batch
        # The source is a state's name (or the state itself, a StrEnum, from an Event):
        # compared with the plain name, which spares the enum's reflected comparison.
        reject = RoundState.REJECT.value

        def on_verify(row: Row, verify: Verify) -> None:
            batches[row[SLOT]] = verify["batch"]

        def on_commit(row: Row, commit: Commit) -> None:
            rejected = batches.pop(row[SLOT], 0) - len(commit["append"])
            if rejected > 0 and row[SOURCE] == reject:
                self.absorbed += rejected
                self.last_seq = row[SEQ]
                self.unrolled.append(Noted(*row[:4], {"rejected": rejected,
                                                      "position": commit["position"]}))

        return {T.VERIFY: on_verify, T.COMMIT: on_commit,
                T.INVARIANT_VIOLATION: self._on_violation}

    def _on_violation(self, row: Row, v: InvariantViolation) -> None:
        if v["invariant"] == Invariant.STATE_TRUTH.value:
            self.last_seq = row[SEQ]
            self.violations.append(Noted(*row[:4], dict(v["details"])))

    def finish(self) -> list[Finding]:
        """One error finding when either sign is present."""
        if not self.unrolled and not self.violations:
            return []
        began = min((*self.unrolled[:1], *self.violations[:1]), key=lambda m: m.seq)
        first_bad = self.violations[0] if self.violations else None
        text = (f"The recurrent state absorbed rejected drafts: it began in turn {began.turn} "
                f"round {began.round} (seq {began.seq}, slot {began.slot}).")
        if self.unrolled:
            text += (f" {len(self.unrolled)} round(s) went from reject straight to commit "
                     f"(strategy {self.strategy}) with {self.absorbed} rejected token(s) left "
                     "in the state, which cannot be trimmed like the KV cache.")
        if first_bad is not None:
            text += (f" {len(self.violations)} commit(s) failed the state-truth audit: the "
                     "digest after commit is not the digest of the committed tokens "
                     f"(first at position {first_bad.detail.get('position')}, "
                     f"error {first_bad.detail.get('error')}).")
        elif not self.audit:
            text += " The run did not audit the state, so this is inferred from the rounds."
        return [Finding(
            Kind.STATE_CONTAMINATION, Severity.ERROR, began.seq, self.last_seq, text,
            ADVICE[Kind.STATE_CONTAMINATION],
            {"began": {"seq": began.seq, "slot": began.slot, "turn": began.turn,
                       "round": began.round},
             "no_rollback_rounds": len(self.unrolled), "rejected_tokens_absorbed": self.absorbed,
             "state_truth_violations": len(self.violations), "strategy": self.strategy,
             "audited": self.audit,
             "first_violations": examples([{"seq": m.seq, "turn": m.turn, "round": m.round,
                                             **m.detail} for m in self.violations], 5)},
            began.slot, began.turn, began.round)]
