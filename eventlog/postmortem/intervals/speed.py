"""Speculation slower than decoding without it: the generation throughput of a run's
windows that drafted against its windows that did not (the same run), or against another
run of the same log that never speculated (a user's A/B pasted in one file)."""

from statistics import median
from typing import Any

from eventlog.postmortem.advice import ADVICE
from eventlog.postmortem.finding import Finding, Kind, Severity
from eventlog.postmortem.intervals import WindowDetector, line_of


class SpeculationSpeed(WindowDetector):
    """Folds the windows; compares the generation throughput of those that drafted with the
    plain ones, its own and its log's other runs'."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self.peers: list[dict[str, Any]] = (config.get("source") or {}).get("peers") or []

    def finish(self) -> list[Finding]:
        """A warning when the median speculative window generates slower than the median
        plain one."""
        spec = [(s, p) for s, p in self.windows.speculative if p["generation_tps"]]
        if not spec:
            return []
        ids = {s for s, _ in spec}
        own = [p["generation_tps"] for s, p in self.windows.rows
               if s not in ids and p["generation_tps"] and p["running"]]
        plain, where = own, "this run's windows that drafted nothing"
        if not plain and self.peers:
            peer = self.peers[0]
            plain = peer["generation_tps"]
            where = (f"run {peer['run']} of the same log (pid {peer['pid']}), which never "
                     "speculated")
        if not plain:
            return []
        fast, slow = median(plain), median(p["generation_tps"] for _, p in spec)
        if slow >= fast:
            return []
        acc = [p["draft_acceptance"] for _, p in spec if p["draft_acceptance"] is not None]
        accepted = f", with {max(acc) * 100:.1f}% of drafted tokens accepted at best" if acc \
            else ""
        return [Finding(
            Kind.SPECULATION_SLOWER, Severity.WARNING, spec[0][0], spec[-1][0],
            f"Speculation generated slower than decoding without it: {slow:.1f} tokens/s "
            f"(median of {len(spec)} window(s) that drafted, from {line_of(spec[0][1])}) "
            f"against {fast:.1f} tokens/s (median of {len(plain)}: {where}){accepted}.",
            ADVICE[Kind.SPECULATION_SLOWER],
            {"speculative_tps": slow, "plain_tps": fast, "speculative_windows": len(spec),
             "plain_windows": len(plain), "first_line": spec[0][1]["line"]})]
