"""Every draft token accepted, window after window: a target that samples rejects some
drafted tokens, so a stretch of windows that accept them all says the output was as
predictable as the drafter's guess, as a request caught in a repetition loop is (SGLang
#28179: accept length 8.00 and rate 1.00 for ten seconds while one request's tokens grew by
320 a second). Greedy decoding of a repetitive text does it too: the finding names the
stretch and its requests, for a look at their output."""


from eventlog.postmortem.advice import ADVICE
from eventlog.postmortem.finding import Finding, Kind, Severity
from eventlog.postmortem.intervals import WindowDetector, line_of
from fsm.payloads import Interval

MIN_STREAK = 5
"""Windows in a row that accept every drafted token before the stretch is reported: one or
two such windows happen on a short, predictable answer."""
ALL = 0.995
"""An acceptance rate printed as 1.00 (two decimals) or 100.0% (one)."""
MIN_DRAFTED = 40
"""Drafted tokens a window with counts needs to be evidence: a window that drafts a few
tokens accepts them all often. SGLang's window is 40 decode steps by default
(`decode_log_interval=40` in its ServerArgs), each drafting at least one token, so its
windows, which print only a rate, draft at least as many. At a healthy 90% per-token
acceptance a window of 40 accepts all with probability 0.015 and five in a row with 7e-10
(`python3 -c "print(0.9**40, (0.9**40)**5)"`)."""


def saturated(p: Interval) -> bool:
    """Whether a window accepted every token it drafted, on enough tokens to tell (by its
    counts where it has them, else by the engine's own rate)."""
    if p["drafted"] is not None:
        return p["drafted"] >= MIN_DRAFTED and p["accepted"] == p["drafted"]
    return p["draft_acceptance"] is not None and p["draft_acceptance"] >= ALL


class AcceptanceSaturated(WindowDetector):
    """Folds the windows that drafted; reports the longest streak that accepted all."""

    def finish(self) -> list[Finding]:
        """A warning for the longest streak of at least MIN_STREAK saturated windows."""
        best: list[tuple[int, Interval]] = []
        streak: list[tuple[int, Interval]] = []
        for row in self.windows.speculative:
            streak = [*streak, row] if saturated(row[1]) else []
            if len(streak) > len(best):
                best = streak
        if len(best) < MIN_STREAK:
            return []
        (s0, p0), (s1, p1) = best[0], best[-1]
        running = sorted({p["running"] for _, p in best if p["running"] is not None})
        tokens = [p.get("tokens") for _, p in best]
        grew = (f"; the KV tokens in use grew from {tokens[0]:,} to {tokens[-1]:,}"
                if tokens[0] is not None and tokens[-1] is not None else "")
        return [Finding(
            Kind.ACCEPTANCE_SATURATED, Severity.WARNING, s0, s1,
            f"Every drafted token was accepted in {len(best)} windows in a row, from "
            f"{line_of(p0)} to {line_of(p1)} (mean acceptance length "
            f"{p0['mean_accept_len']}, {'/'.join(map(str, running)) or 'unknown'} request(s) "
            f"running{grew}): a sampling target rejects some drafts, so the output was as "
            "predictable as the drafter's guess, as a repetition loop is.",
            ADVICE[Kind.ACCEPTANCE_SATURATED],
            {"windows": len(best), "first_line": p0["line"], "last_line": p1["line"],
             "mean_accept_len": p0["mean_accept_len"], "running": running})]
