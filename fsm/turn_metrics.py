"""A turn's figures, declared once: the counts and times the event log's one fold counts
from a turn's events (eventlog/turn_fold.py), live in a running session (engine/metrics.py
records them in END_TURN's metrics) and again from a stored log, and the rates derived
from them. END_TURN's `TurnMetricsRow` (fsm/payloads.py, docs/events.md) is generated from
this declaration: each field's metadata is its row field's `doc`, `unit` and `timing`."""

from dataclasses import asdict, dataclass, field
from typing import Any

_TOKENS = "tokens"


def _figure(default: float, doc: str, unit: str = "", *, timing: bool = False) -> Any:
    """A field of `TurnMetrics`, with what `TurnMetricsRow` says of it."""
    return field(default=default, metadata={"doc": doc, "unit": unit, "timing": timing})


KEY = ("slot", "turn")
"""The figures every turn knows; an imported log may leave any other unknown (None)."""
RATES: dict[str, dict[str, Any]] = {
    "decode_tps": {"doc": "generated tokens per decode second", "unit": "tokens/s",
                   "timing": True},
    "acceptance": {"doc": "accepted / drafted", "unit": "ratio", "timing": False},
}
"""The rates `TurnMetrics.to_dict` adds, each a property of the same name."""


@dataclass(slots=True)
class TurnMetrics:
    """One turn boundary of one slot. Times are on the backend's clock, in seconds.

    `kept_tokens` is the longest common prefix of the slot and the new prompt, and
    `f_keep` that over the slot's length (1.0 for an empty slot); `reprefill_tokens`
    counts history tokens processed a second time because the recurrent state had to
    fall back to an older context checkpoint.

    Conversation cost (docs/design.md#conversation-cost), `conversation_s`, sums three parts:
    generation (`generation_s`: decode time less rollbacks), state repair
    (`state_repair_s`: in-round rollbacks plus the context-checkpoint restore at the turn
    boundary, `repair_s`) and repeated prefill (`reprefill_s`: prefill time of the
    re-prefilled history). First-time prefill of new prompt tokens is in none of them:
    every policy pays it alike.
    """

    slot: int = _figure(0, "the slot")
    turn: int = _figure(0, "the turn")
    prompt_tokens: int = _figure(0, "prompt length", _TOKENS)
    generated_tokens: int = _figure(0, "visible answer length, EOG included", _TOKENS)
    drafted: int = _figure(0, "drafted tokens verified", _TOKENS)
    accepted: int = _figure(0, "drafted tokens accepted", _TOKENS)
    kept_tokens: int = _figure(0, "prefix kept at the turn's start", _TOKENS)
    f_keep: float = _figure(1.0, "kept / slot length", "ratio")
    reprefill_tokens: int = _figure(0, "history processed again", _TOKENS)
    restores: int = _figure(0, "in-round restores", "count")
    ctx_restores: int = _figure(0, "context-checkpoint restores", "count")
    rounds: int = _figure(0, "rounds", "count")
    stray_tokens: int = _figure(0, "tokens left behind EOG (#28049)", _TOKENS)
    prefill_tokens: int = _figure(0, "prompt tokens processed", _TOKENS)
    prefill_s: float = _figure(0.0, "prefill time", "s", timing=True)
    decode_s: float = _figure(0.0, "decode time", "s", timing=True)
    rollback_s: float = _figure(0.0, "in-round rollback time", "s", timing=True)
    repair_s: float = _figure(0.0, "context restore time", "s", timing=True)
    reprefill_s: float = _figure(0.0, "prefill time of the repeated history", "s",
                                 timing=True)
    livelocks: int = _figure(0, "livelocks the guard ended", "count")
    violations: int = _figure(0, "invariant violations recorded", "count")

    @property
    def decode_tps(self) -> float:
        """Generated tokens per second of decode time."""
        return self.generated_tokens / self.decode_s if self.decode_s > 0 else 0.0

    @property
    def acceptance(self) -> float:
        """Accepted over drafted tokens."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def generation_s(self) -> float:
        """Decode time spent producing tokens (rollbacks excluded)."""
        return self.decode_s - self.rollback_s

    @property
    def state_repair_s(self) -> float:
        """Time spent undoing state: in-round rollbacks and the turn's checkpoint restore."""
        return self.rollback_s + self.repair_s

    @property
    def conversation_s(self) -> float:
        """Conversation cost: generation + state repair + repeated prefill."""
        return self.generation_s + self.state_repair_s + self.reprefill_s

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping, with the derived rates (`RATES`)."""
        return asdict(self) | {name: getattr(self, name) for name in RATES}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TurnMetrics":
        """Inverse of `to_dict` (derived rates are recomputed)."""
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})
