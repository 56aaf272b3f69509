"""The invariants of docs/design.md#invariants as pure checks over plain facts.

The engine checks them at commit and turn end, all but 4 (lossless), which needs a plain
run beside the speculative one: the postmortem decides it against a reference
(eventlog/postmortem/reference.py). `postmortem` re-checks the others from the
log. A check returns violations; raising is the caller's choice (`--strict`).
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fsm.payloads import InvariantViolation


class Invariant(StrEnum):
    """The six invariants, numbered as in docs/design.md#invariants."""

    SLOT_PREFIX = "slot_prefix"            # 1
    STATE_TRUTH = "state_truth"            # 2
    FORWARD_PROGRESS = "forward_progress"  # 3
    LOSSLESS = "lossless"                  # 4
    BOOKKEEPING = "bookkeeping"            # 5
    DRAFT_STATE = "draft_state"            # 6


@dataclass(frozen=True, slots=True)
class Violation:
    """One failed invariant, with the numbers that show it."""

    invariant: Invariant
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_payload(self) -> InvariantViolation:
        """The event payload of an `invariant_violation` event."""
        return {"invariant": self.invariant.value, "message": self.message,
                "details": self.details}


@dataclass(frozen=True, slots=True)
class Audit:
    """The backend's comparison of the live state with the state that processing the
    committed tokens one by one produces: `ok` within the backend's tolerance (exact for
    the sim, a relative error bound for floating point), `error` the measured difference."""

    ok: bool
    expected_digest: str
    error: float = 0.0


@dataclass(frozen=True, slots=True)
class CommitFacts:
    """What the engine knows right after a commit; `audit` is None when the run does not
    audit the state."""

    committed: int
    n_tokens: int
    position: int
    kv_len: int
    digest: str
    audit: Audit | None
    ctx_positions: Sequence[int] = ()
    draft_position: int | None = None
    draft_expected_position: int | None = None


def check_commit(f: CommitFacts) -> list[Violation]:
    """Invariants 2, 3, 5 and 6 after one commit."""
    out: list[Violation] = []
    if f.committed < 1:
        out.append(Violation(Invariant.FORWARD_PROGRESS, "round committed no token"))
    if f.audit is not None and not f.audit.ok:
        out.append(Violation(
            Invariant.STATE_TRUTH,
            f"state digest {f.digest} != sequential digest {f.audit.expected_digest} at "
            f"position {f.position} (error {f.audit.error:.3g}): the recurrent state holds "
            "tokens the slot did not commit",
            {"position": f.position, "digest": f.digest, "expected": f.audit.expected_digest,
             "error": f.audit.error}))
    if not (f.kv_len == f.position and f.position in (f.n_tokens, f.n_tokens - 1)):
        out.append(Violation(
            Invariant.BOOKKEEPING,
            f"kv length {f.kv_len}, state position {f.position} and slot length "
            f"{f.n_tokens} disagree",
            {"kv_len": f.kv_len, "position": f.position, "n_tokens": f.n_tokens}))
    beyond = [p for p in f.ctx_positions if p > f.n_tokens]
    if beyond:
        out.append(Violation(
            Invariant.BOOKKEEPING,
            f"context checkpoints at {beyond} lie beyond the committed length {f.n_tokens}",
            {"beyond": beyond, "n_tokens": f.n_tokens}))
    if f.draft_position is not None and f.draft_position != f.draft_expected_position:
        out.append(Violation(
            Invariant.DRAFT_STATE,
            f"draft state at position {f.draft_position}, its committed prefix is "
            f"{f.draft_expected_position}",
            {"draft_position": f.draft_position, "expected": f.draft_expected_position}))
    return out


def check_turn_end(slot_tokens: Sequence[int], transcript: Sequence[int],
                   stop: str | None = None) -> list[Violation]:
    """Invariant 1: after a turn the slot holds exactly the external transcript. `stop`
    names a stop other than EOG that ended the turn (a length limit): tokens behind it are
    not #28049's, and the violation says which stop they stayed behind."""
    if list(slot_tokens) == list(transcript):
        return []
    stray = len(slot_tokens) - len(transcript)
    details: dict[str, Any] = {"slot_len": len(slot_tokens), "transcript_len": len(transcript),
                               "stray": list(slot_tokens[len(transcript):])}
    if stop is not None:
        details["stop"] = stop
    return [Violation(
        Invariant.SLOT_PREFIX,
        f"slot holds {len(slot_tokens)} tokens, transcript {len(transcript)}: "
        f"{max(stray, 0)} stray token(s) behind {'EOG' if stop is None else f'the {stop} stop'}",
        details)]


class ProgressGuard:
    """Invariant 3's livelock detector: the same checkpoint restored `limit` times at one
    position without the position moving on. `limit` 0 disables it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._position = -1
        self._count = 0

    def note_restore(self, position: int) -> bool:
        """Count a restore at `position`; True when it is a livelock."""
        if position != self._position:
            self._position, self._count = position, 0
        self._count += 1
        return self.limit > 0 and self._count >= self.limit

    @property
    def restores(self) -> int:
        """Restores at the current position so far."""
        return self._count

    def note_progress(self) -> None:
        """The position moved on: forget the count."""
        self._position, self._count = -1, 0
