"""State and trigger names: the contract the event log stores (docs/design.md#round-transaction)."""

from enum import StrEnum


class RoundState(StrEnum):
    """One sequence's position in the round transaction."""

    IDLE = "idle"
    CHECKPOINT = "checkpoint"
    SPECULATE = "speculate"
    VERIFY = "verify"
    ACCEPT = "accept"
    REJECT = "reject"
    RESTORE = "restore"
    REPLAY = "replay"
    COMMIT = "commit"
    DONE = "done"
    FAILED = "failed"


class Trigger(StrEnum):
    """Event kinds. Each one is a transition of `RoundMachine`; the last group are
    reflexive (source == destination) so that notes such as a violation are events too."""

    # the round transaction
    BEGIN = "begin"              # idle -> checkpoint
    DRAFT = "draft"              # checkpoint -> speculate
    VERIFY = "verify"            # speculate -> verify (needs a draft)
    DECODE = "decode"            # idle | speculate -> verify with no draft (plain step)
    ACCEPT = "accept"            # verify -> accept (every draft accepted)
    REJECT = "reject"            # verify -> reject (a draft rejected)
    RESTORE = "restore"          # reject | replay -> restore
    REPLAY = "replay"            # restore -> replay
    COMMIT = "commit"            # accept | replay | restore | reject -> commit
    NEXT = "next"                # commit -> idle
    RETRY = "retry"              # restore -> verify (reverify: verification runs again)
    # turns and slots
    START_TURN = "start_turn"    # idle | done | failed -> idle
    PREFILL = "prefill"          # idle -> idle
    CTX_SAVE = "ctx_save"        # idle -> idle
    CTX_RESTORE = "ctx_restore"  # idle -> idle
    END_TURN = "end_turn"        # commit | idle -> done
    FAIL = "fail"                # any -> failed
    # notes (reflexive)
    INVARIANT_VIOLATION = "invariant_violation"
    LIVELOCK = "livelock"
    # a server log's aggregate over an interval or a batch (reflexive: no slot moves)
    INTERVAL = "interval"


TRANSITIONS: tuple[tuple[Trigger, tuple[RoundState, ...], RoundState | None], ...] = (
    (Trigger.BEGIN, (RoundState.IDLE,), RoundState.CHECKPOINT),
    (Trigger.DRAFT, (RoundState.CHECKPOINT,), RoundState.SPECULATE),
    (Trigger.VERIFY, (RoundState.SPECULATE,), RoundState.VERIFY),
    (Trigger.DECODE, (RoundState.IDLE, RoundState.SPECULATE), RoundState.VERIFY),
    (Trigger.ACCEPT, (RoundState.VERIFY,), RoundState.ACCEPT),
    (Trigger.REJECT, (RoundState.VERIFY,), RoundState.REJECT),
    (Trigger.RESTORE, (RoundState.REJECT, RoundState.REPLAY), RoundState.RESTORE),
    (Trigger.REPLAY, (RoundState.RESTORE,), RoundState.REPLAY),
    # reject -> commit is the no-rollback path (`none`): legal, and caught by invariant 2.
    (Trigger.COMMIT, (RoundState.ACCEPT, RoundState.REPLAY, RoundState.RESTORE,
                      RoundState.REJECT), RoundState.COMMIT),
    (Trigger.NEXT, (RoundState.COMMIT,), RoundState.IDLE),
    (Trigger.RETRY, (RoundState.RESTORE,), RoundState.VERIFY),
    # From `failed`: a slot whose request failed (an imported log's piece cut inside it)
    # takes the next request the log shows on it.
    (Trigger.START_TURN, (RoundState.IDLE, RoundState.DONE, RoundState.FAILED),
     RoundState.IDLE),
    (Trigger.PREFILL, (RoundState.IDLE,), RoundState.IDLE),
    (Trigger.CTX_SAVE, (RoundState.IDLE,), RoundState.IDLE),
    (Trigger.CTX_RESTORE, (RoundState.IDLE,), RoundState.IDLE),
    (Trigger.END_TURN, (RoundState.COMMIT, RoundState.IDLE), RoundState.DONE),
    (Trigger.FAIL, tuple(RoundState), RoundState.FAILED),
    (Trigger.INVARIANT_VIOLATION, tuple(RoundState), None),
    (Trigger.LIVELOCK, tuple(RoundState), None),
    (Trigger.INTERVAL, tuple(RoundState), None),
)
"""(trigger, sources, destination); destination None means 'stay in the source state'."""
