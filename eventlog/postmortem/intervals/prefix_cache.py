"""The prefix cache of a hybrid model with speculation: a hit rate of 0 over a whole run.
vLLM keeps a hybrid model's recurrent (Mamba / GDN) state for prefix caching only in its
"align" mode, and a speculative run with prefix caching off prefills every request's whole
prompt again, however much of it the last request shared (adapters/vllm/options.py). SGLang
prints no hit rate in its newer prefill lines, only the prompt tokens the cache held
(`#cached-token`): 0 of them is a window without a hit."""

from typing import Any

from eventlog.postmortem.advice import ADVICE
from eventlog.postmortem.detector import Handler
from eventlog.postmortem.finding import Finding, Kind, Severity
from eventlog.postmortem.intervals import Windows, line_of
from eventlog.series import is_series
from fsm.states import Trigger


class PrefixCacheZero:
    """Folds the windows; reports a hit rate of 0 in every window that prefilled, in a
    hybrid model's speculative run."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.on = is_series(config) and bool(config.get("hybrid"))
        self.caching: bool | None = config.get("prefix_caching")
        self.method = config.get("drafter")
        self.windows = Windows()

    def handlers(self) -> dict[Trigger, Handler]:
        """INTERVAL, for a hybrid model's interval session only."""
        return {Trigger.INTERVAL: self.windows.on_interval} if self.on else {}

    def finish(self) -> list[Finding]:
        """A note where the log says prefix caching is off, a warning where it is on (or not
        logged) yet never hit."""
        rows = self.windows.rows
        if not (self.method or self.windows.speculative):
            return []
        prefilled = [(s, p) for s, p in rows if p["prompt_tps"] and
                     (p["prefix_hit_rate"] is not None or p.get("cached_tokens") is not None)]
        if len(prefilled) < 2 or any(p["prefix_hit_rate"] or p.get("cached_tokens")
                                     for _, p in prefilled):
            return []
        off = self.caching is False
        why = ("prefix caching is off (the engine's config says enable_prefix_caching=False)"
               if off else "prefix caching is on, or not logged, yet nothing hit")
        return [Finding(
            Kind.PREFIX_CACHE_ZERO, Severity.INFO if off else Severity.WARNING,
            prefilled[0][0], prefilled[-1][0],
            f"The prefix cache hit rate was 0% in all {len(prefilled)} window(s) that "
            f"prefilled (from {line_of(prefilled[0][1])}), on a hybrid model with "
            f"speculation ({self.method or 'method not logged'}): {why}, so every request "
            "prefilled its whole prompt, history included.", ADVICE[Kind.PREFIX_CACHE_ZERO],
            {"windows": len(prefilled), "prefix_caching": self.caching,
             "first_line": prefilled[0][1]["line"]})]
