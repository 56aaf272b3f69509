"""The counts and times of one turn, as the event log's one fold counts them from the
turn's events (`eventlog/fold.py`): live in a running session (`engine/metrics.py`, which
records them in END_TURN's metrics, docs/events.md) and again from a stored log."""

from dataclasses import dataclass


@dataclass(slots=True)
class TurnCounts:
    """One turn boundary of one slot. Token counts, and times in seconds on the backend's
    clock; `engine.metrics.TurnMetrics` says what each means and adds the derived rates."""

    slot: int = 0
    turn: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    drafted: int = 0
    accepted: int = 0
    kept_tokens: int = 0
    f_keep: float = 1.0
    reprefill_tokens: int = 0
    restores: int = 0
    ctx_restores: int = 0
    rounds: int = 0
    stray_tokens: int = 0
    prefill_tokens: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    rollback_s: float = 0.0
    repair_s: float = 0.0
    reprefill_s: float = 0.0
    livelocks: int = 0
    violations: int = 0
