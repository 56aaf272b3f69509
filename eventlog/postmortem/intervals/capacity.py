"""The engine's capacity over an interval run: its KV cache full, a hybrid model's Mamba
state pool full (SGLang keeps one recurrent state for each running request and those its
prefix cache holds: with none free, no request can start), and requests waiting for room
(the scheduler holds them back, or preempts running ones to make room)."""


from eventlog.postmortem.advice import ADVICE, CAUSE_ADVICE, Cause
from eventlog.postmortem.finding import Finding, Kind, Severity
from eventlog.postmortem.intervals import WindowDetector, line_of, pct

FULL = 0.99
"""KV cache usage from which the cache is full: vLLM prints it with one decimal, so 99.0%
and up leave at most one block in a hundred free."""


class Capacity(WindowDetector):
    """Folds the windows; reports the cache full and requests waiting."""

    def finish(self) -> list[Finding]:
        """KV cache full (a warning), requests waiting (a note; a warning with the cache
        full)."""
        rows = self.windows.rows
        full = [(s, p) for s, p in rows if (p["kv_usage"] or 0.0) >= FULL]
        states = [(s, p) for s, p in rows if (p.get("mamba_usage") or 0.0) >= FULL]
        waiting = [(s, p) for s, p in rows if p["waiting"] or p.get("preemptions")]
        out = []
        if full:
            top = max(p["kv_usage"] for _, p in full)
            out.append(Finding(
                Kind.KV_CACHE_EXHAUSTED, Severity.WARNING, full[0][0], full[-1][0],
                f"The KV cache was full ({pct(top)} in use at most) in {len(full)} of "
                f"{len(rows)} window(s), first at {line_of(full[0][1])} with "
                f"{full[0][1]['running']} request(s) running and {full[0][1]['waiting']} "
                "waiting.", CAUSE_ADVICE[Cause.ENGINE_KV],
                {"windows": len(full), "kv_usage": top, "first_line": full[0][1]["line"]}))
        if states:
            top = max(p.get("mamba_usage") or 0.0 for _, p in states)
            first = states[0][1]
            out.append(Finding(
                Kind.KV_CACHE_EXHAUSTED, Severity.WARNING, states[0][0], states[-1][0],
                f"The Mamba state pool was full ({pct(top)} in use at most) in {len(states)} "
                f"of {len(rows)} window(s), first at {line_of(first)} with "
                f"{first['running']} request(s) running and {first['waiting']} waiting: a "
                "hybrid model's request needs a free recurrent state to start.",
                CAUSE_ADVICE[Cause.ENGINE_KV],
                {"windows": len(states), "mamba_usage": top, "first_line": first["line"]}))
        if waiting:
            most = max(waiting, key=lambda r: r[1]["waiting"] or 0)
            preempted = sum(p.get("preemptions") or 0 for _, p in waiting)
            also = f"; {preempted} request(s) preempted" if preempted else ""
            out.append(Finding(
                Kind.REQUESTS_WAITING, Severity.WARNING if full or states else Severity.INFO,
                waiting[0][0], waiting[-1][0],
                f"Requests waited for the engine in {len(waiting)} of {len(rows)} "
                f"window(s), up to {most[1]['waiting']} at {line_of(most[1])} (KV cache "
                f"{pct(most[1]['kv_usage'] or 0.0)} in use, {most[1]['running']} running)"
                f"{also}.",
                ADVICE[Kind.REQUESTS_WAITING],
                {"windows": len(waiting), "max_waiting": most[1]["waiting"],
                 "preemptions": preempted,
                 "first_line": waiting[0][1]["line"]}))
        return out
