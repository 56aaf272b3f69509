"""Counters of one stats line that contradict each other: vLLM's SpecDecoding line prints
accepted and drafted tokens, their ratio (`Avg Draft acceptance rate`), the mean acceptance
length and the acceptance at each position, which hold `ratio = accepted / drafted`,
`mean length = 1 + sum of the positions' rates` (a verify emits its accepted drafts and one
token of its own) and rates that never rise with the position (a draft is accepted only
behind accepted ones). SGLang's batch line prints the requests running and the KV tokens
they hold (`#token`, a hybrid's `#full token`): a running request holds at least one. Each
check allows the rounding of the printed figures. A lone batch line with running requests and
no tokens is a note, not a warning: SGLang samples the two at different moments, and a request
freed between them (its answer logged just before) leaves one such line in a healthy run."""


from eventlog.postmortem.advice import CAUSE_ADVICE, Cause
from eventlog.postmortem.finding import Finding, Kind, Severity
from eventlog.postmortem.intervals import WindowDetector, line_of
from fsm.payloads import Interval

_PCT_ROUND = 0.0005   # a percentage printed with one decimal
_LEN_ROUND = 0.005    # a length printed with two decimals
_RATE_ROUND = 0.0005  # a rate printed with three decimals


def contradictions(p: Interval) -> list[str]:
    """What one window's figures contradict in each other (empty: nothing)."""
    out = []
    acc, drafted, ratio = p["accepted"], p["drafted"], p["draft_acceptance"]
    if acc is not None and drafted is not None and acc > drafted:
        out.append(f"accepted {acc} > drafted {drafted}")
    if acc is not None and drafted and ratio is not None and \
            abs(acc / drafted - ratio) > _PCT_ROUND + 1e-9:
        out.append(f"acceptance rate {ratio * 100:.1f}% but accepted / drafted = "
                   f"{acc}/{drafted} = {acc / drafted * 100:.2f}%")
    if _empty_running(p):
        out.append(f"{p['running']} request(s) running but 0 KV tokens in use (#token)")
    pos, mean = p["acc_per_pos"], p["mean_accept_len"]
    if pos and mean is not None and \
            abs(1 + sum(pos) - mean) > _LEN_ROUND + _RATE_ROUND * len(pos) + 1e-9:
        out.append(f"mean acceptance length {mean} but 1 + the positions' rates = "
                   f"{1 + sum(pos):.3f}")
    if pos:
        rises = [i + 2 for i in range(len(pos) - 1) if pos[i + 1] > pos[i] + _RATE_ROUND]
        if rises:
            out.append(f"position {rises[0]} accepted more often ({pos[rises[0] - 1]}) than "
                       f"position {rises[0] - 1} ({pos[rises[0] - 2]})")
    return out


def _empty_running(p: Interval) -> bool:
    """Requests running while the line says no KV token is in use."""
    return p.get("tokens") == 0 and bool(p["running"])


def _severity(bad: list[tuple[int, Interval, list[str]]]) -> Severity:
    """A warning, unless the only contradiction is one line of running requests without
    tokens (the sampling race in the module's docstring)."""
    lone = len(bad) == 1 and len(bad[0][2]) == 1 and _empty_running(bad[0][1])
    return Severity.INFO if lone else Severity.WARNING


class IntervalCounters(WindowDetector):
    """Checks each window as it comes."""

    def finish(self) -> list[Finding]:
        """One finding for the windows whose counters disagree, quoting the first."""
        bad = [(s, p, c) for s, p in self.windows.rows if (c := contradictions(p))]
        if not bad:
            return []
        s, p, c = bad[0]
        severity = _severity(bad)
        race = (" One line alone: the engine samples the two figures at different moments, "
                "and a request freed between them leaves such a line." if
                severity is Severity.INFO else "")
        return [Finding(
            Kind.ENGINE_COUNTER_MISMATCH, severity, s, bad[-1][0],
            f"{len(bad)} stats line(s) contradict themselves, first at {line_of(p)}: "
            f"{'; '.join(c)}.{race}", CAUSE_ADVICE[Cause.ENGINE_COUNTERS],
            {"windows": len(bad), "first_line": p["line"], "first": c})]
