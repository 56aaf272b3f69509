"""Interval payloads as SGLang's batch lines give them (no drafted counts, no per-position
rates), fed to an interval detector as the postmortem's pass feeds them."""

from typing import Any

from fsm.payloads import Interval
from fsm.states import Trigger

CONFIG: dict[str, Any] = {"series": "intervals", "hybrid": True, "drafter": "EAGLE"}


def window(line: int, **given: Any) -> Interval:
    """A decode window with the figures `given`, every other one None."""
    fields = ("clock", "engine", "prompt_tps", "generation_tps", "running", "waiting",
              "kv_usage", "prefix_hit_rate", "mean_accept_len", "accepted_tps",
              "drafted_tps", "accepted", "drafted", "acc_per_pos", "draft_acceptance")
    return Interval(line=line, kind="decode_batch",  # type: ignore[typeddict-item]
                    **{f: None for f in fields} | given)


def feed(detector: Any, windows: list[Interval]) -> list[Any]:
    """The detector's findings after the windows, in order."""
    on = detector.handlers()[Trigger.INTERVAL]
    for seq, p in enumerate(windows, 1):
        on((seq,), p)
    return detector.finish()
