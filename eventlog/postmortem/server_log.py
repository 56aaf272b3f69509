"""What an imported server log says besides its rounds: a server that died, a KV cache with no
room for the requests in flight, HTTP errors and their causes, every context checkpoint of a
slot erased, acceptance counts no sampling verifier reaches, each drafter's own totals, and
the requests a piece of a log cuts.

These come from the session's stored source (adapters/llama/ledger/provenance.py: the run's ending
and last lines, its server-level events, its overflows, the drafters' statistics, the
requests' sampling and draft totals) and from the events that carry them (a `fail` of a task
whose end the log does not show, a `ctx_restore` that erased checkpoints). A session of our
own engines stores no such source, and this detector says nothing about it.
"""

import time
from typing import Any

from eventlog.postmortem.advice import ADVICE
from eventlog.postmortem.detector import ROUND, SEQ, SLOT, TURN, Handler, Row, examples
from eventlog.postmortem.eog import REPREFILL_SLACK
from eventlog.postmortem.finding import Finding, Kind, Noted, Severity
from fsm import payloads as pl
from fsm.states import Trigger

IMPLAUSIBLE_DRAFTS = 100
"""A drafter whose every draft had a token accepted is implausible from this many drafts on:
a verifier that samples rejects some drafts' first token."""
_TEMPERATURE_1 = "temperature 1.0 (each request's sampler chain draws, `dist`, with the " \
                 "temperature sampler idle, `?temp-ext`)"


def _n(x: int | float) -> str:
    return f"{x:,}"


class ServerLogCheck:
    """Folds the cut requests and the checkpoint erasures; reports the rest from the
    stored source."""

    def __init__(self, config: dict[str, Any]) -> None:
        src = config.get("source") or {}
        self.src: dict[str, Any] = src if "server_log" in src else {}
        self.n_ctx, self.kv_unified = config.get("n_ctx"), config.get("kv_unified")
        self.wall_start = (self.src.get("run") or {}).get("wall_start")
        self.cuts: list[Noted] = []
        self.erased: list[Noted] = []
        self._selected: dict[int, str | None] = {}  # slot -> how its turn's slot was chosen

    def handlers(self) -> dict[Trigger, Handler]:
        """FAIL (a request the log cuts) and CTX_RESTORE (checkpoints erased), for an
        imported server log only."""
        if not self.src:
            return {}
        return {Trigger.FAIL: self._on_fail, Trigger.CTX_RESTORE: self._on_restore,
                Trigger.START_TURN: self._on_start}

    def _on_start(self, row: Row, p: pl.StartTurn) -> None:
        self._selected[row[SLOT]] = p.get("selected_by")

    def _on_fail(self, row: Row, fail: pl.Fail) -> None:
        if fail.get("truncated"):
            self.cuts.append(Noted(row[SEQ], row[SLOT], row[TURN], row[ROUND], fail))

    def _on_restore(self, row: Row, p: pl.CtxRestore) -> None:
        if not p.get("erased") or p["position"] != 0:
            return
        shared = p.get("reprefill")
        # A new conversation shares nothing: erasing a slot's checkpoints then is right.
        # Where the log does not say what was shared, a slot chosen by similarity says more
        # was than one chosen as the least recently used.
        if (shared is not None and shared > REPREFILL_SLACK) or (
                shared is None and self._selected.get(row[SLOT]) != "lru"):
            self.erased.append(Noted(row[SEQ], row[SLOT], row[TURN], row[ROUND], p))

    def finish(self) -> list[Finding]:
        """Each finding the source and the folded events hold."""
        if not self.src:
            return []
        found = [self._crash(), *self._overflows(), self._http(), self._erased(),
                 self._implausible(), self._drafters(), self._partial()]
        return [f for f in found if f is not None]

    def _crash(self) -> Finding | None:
        run = self.src.get("run") or {}
        if run.get("ending") != "died":
            return None
        crashes = [e for e in self.src["server_log"]["events"] if e["kind"] == "crash"]
        open_ = [c for c in self.cuts if c.detail.get("cut") == "server_died"]
        text = (f"The server died: its run (lines {run['first_line']}-{run['last_line']} of the "
                f"log) ends without its shutdown lines")
        if crashes:
            text += f", after line {crashes[0]['line']}: {crashes[0]['text']!r}"
        if open_:
            first = open_[0]
            text += (f". It was serving {len(open_)} request(s); the first, in turn "
                     f"{first.turn} round {first.round} (slot {first.slot}): "
                     f"{first.detail['error']}")
        else:
            text += ". No request was open then"
        text += f". Its last lines: {' | '.join(run.get('last_lines', [])[-4:])}"
        anchor = open_[0] if open_ else None
        return Finding(
            Kind.SERVER_CRASH, Severity.ERROR, anchor.seq if anchor else 0,
            anchor.seq if anchor else 0, text, ADVICE[Kind.SERVER_CRASH],
            {"first_line": run["first_line"], "last_line": run["last_line"],
             "crash_lines": [(e["line"], e["text"]) for e in crashes],
             "open_requests": [c.detail["error"] for c in open_],
             "last_lines": run.get("last_lines", [])},
            anchor.slot if anchor else None, anchor.turn if anchor else None,
            anchor.round if anchor else None)

    def _overflows(self) -> list[Finding]:
        out = []
        pool = (f" of the {_n(self.n_ctx)} cells all slots share (kv_unified)"
                if self.kv_unified and self.n_ctx else
                f" of {_n(self.n_ctx)} cells" if self.n_ctx else "")
        for o in self.src.get("overflows", []):
            held = sum(f["tokens"] for f in o["in_flight"])
            flight = ", ".join(f"task {f['task']} on slot {f['slot']} ({_n(f['tokens'])})"
                               for f in o["in_flight"])
            text = (f"At line {o['first_line']}{self._clock(o['t'])} the KV cache had no room "
                    f"for a batch: "
                    f"{o['retries']} retries with smaller batches"
                    + (", then `Context size has been exceeded`" if o["exceeded"] else ""))
            if o["failed"]:
                text += (f"; the server failed task(s) {', '.join(map(str, o['failed']))} "
                         "with it")
            text += (f". The requests in flight then held at least {_n(held)} tokens{pool}: "
                     f"{flight or 'none the log shows'}.")
            out.append(Finding(
                Kind.KV_CACHE_EXHAUSTED, Severity.ERROR if o["failed"] else Severity.WARNING,
                0, 0, text, ADVICE[Kind.KV_CACHE_EXHAUSTED],
                {**o, "in_flight_tokens": held, "n_ctx": self.n_ctx,
                 "kv_unified": self.kv_unified}))
        return out

    def _clock(self, t: float | None) -> str:
        """` (2026-05-15 18:45:45 by the log's clock)` where the lines carry a wall-clock
        prefix, else nothing."""
        if self.wall_start is None or t is None:
            return ""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.wall_start + t))
        return f" ({stamp} by the log's clock)"

    def _http(self) -> Finding | None:
        log = self.src["server_log"]
        causes = log.get("error_causes", [])
        if not causes:
            return None
        total = sum(c["count"] for c in causes)
        by = "; ".join(f"{c['count']}x {c['status']} ({c['cause']})" for c in causes)
        return Finding(
            Kind.HTTP_ERRORS, Severity.WARNING, 0, 0,
            f"The server answered {total} request(s) with an HTTP error, by the cause it "
            f"logged just before: {by}.",
            ADVICE[Kind.HTTP_ERRORS],
            {"statuses": log["statuses"], "causes": causes,
             "examples": examples(log.get("http_errors", []))})

    def _erased(self) -> Finding | None:
        e = self.erased
        if not e:
            return None
        first = e[0]
        p: pl.CtxRestore = first.detail
        shared = sum(x.detail.get("reprefill", 0) for x in e)
        text = (f"In {len(e)} turn(s) the server erased every context checkpoint of the slot "
                f"and went back to position 0: turn {first.turn} (slot {first.slot}) erased "
                f"{p['erased']} (the newest at {_n(p.get('newest_erased', 0))} tokens)")
        text += (f"; {_n(shared)} shared history tokens were prefilled again." if shared else
                 "; how much of that history the prompt shared, the log does not show.")
        return Finding(
            Kind.CHECKPOINTS_ERASED, Severity.WARNING, first.seq, e[-1].seq, text,
            ADVICE[Kind.CHECKPOINTS_ERASED],
            {"turns": len(e), "reprefill_tokens": shared,
             "per_turn": examples([{"seq": x.seq, "slot": x.slot, "turn": x.turn,
                                    **x.detail} for x in e])},
            first.slot, first.turn, first.round)

    def _implausible(self) -> Finding | None:
        stats = self.src.get("drafter_stats", {})
        whole = {name: s for name, s in stats.items()
                 if s["gen_drafts"] >= IMPLAUSIBLE_DRAFTS and s["acc_drafts"] == s["gen_drafts"]}
        sampling = self.src.get("sampling", {})
        if not whole or sampling.get("greedy"):
            return None  # a greedy verifier may accept an n-gram's drafts of repeated text
        if sampling.get("sampled"):
            how, severity = "a temperature above 0 (their sampler parameters)", Severity.WARNING
        elif sampling.get("temperature_1") and sampling["temperature_1"] == sampling["draws"]:
            how, severity = _TEMPERATURE_1, Severity.WARNING
        else:
            how, severity = ("a temperature the log does not show (its sampler chains do "
                             "not say it; at any temperature above 0 this is not what a "
                             "verifier decides)"), Severity.INFO
        name, s = next(iter(whole.items()))
        rate = s["acc_tokens"] / s["gen_tokens"] if s["gen_tokens"] else 0.0
        acc = self.src.get("acceptance", {})
        text = (f"Drafter {name}: every one of its {_n(s['gen_drafts'])} drafts since the "
                f"server started had a token accepted (its statistics line: #acc drafts = "
                f"#gen drafts), and {_n(s['acc_tokens'])} of {_n(s['gen_tokens'])} drafted "
                f"tokens ({rate:.1%}) were, while the requests sampled at {how}.")
        if acc.get("sized"):
            text += (f" {acc['all_accepted']} of the {acc['sized']} requests that drafted "
                     f"{acc['min_drafts']}+ tokens accepted every draft token.")
        text += (" A verifier that samples rejects some first tokens of a real drafter's "
                 "drafts; counts like these are not what it decided.")
        return Finding(Kind.ACCEPTANCE_IMPLAUSIBLE, severity, 0, 0, text,
                       ADVICE[Kind.ACCEPTANCE_IMPLAUSIBLE],
                       {"drafters": whole, "sampling": sampling, "acceptance": acc})

    def _drafters(self) -> Finding | None:
        stats = self.src.get("drafter_stats", {})
        if not stats:
            return None
        parts = []
        for name, s in stats.items():
            if not s["gen_drafts"]:
                parts.append(f"{name} was called {_n(s['calls_draft'])} times and drafted "
                             "nothing")
            else:
                rate = s["acc_tokens"] / s["gen_tokens"] if s["gen_tokens"] else 0.0
                parts.append(f"{name} drafted {_n(s['gen_drafts'])} times, "
                             f"{_n(s['acc_tokens'])} of {_n(s['gen_tokens'])} tokens "
                             f"accepted ({rate:.1%})")
        return Finding(Kind.DRAFTER_STATS, Severity.INFO, 0, 0,
                       "Each drafter's own statistics since the server started (its last "
                       f"`statistics` line): {'; '.join(parts)}.",
                       ADVICE[Kind.DRAFTER_STATS], {"drafters": stats})

    def _partial(self) -> Finding | None:
        cuts = [c for c in self.cuts if c.detail.get("cut", "log_ends") != "server_died"]
        head = self.src.get("head_cut_tasks", [])
        if not cuts and not head:
            return None
        parts = []
        if head:
            parts.append(f"it begins inside task(s) {', '.join(map(str, head))}")
        if cuts:
            parts.append("it does not show the end of " + "; ".join(
                c.detail["error"] for c in cuts[:3]) + (f" (and {len(cuts) - 3} more)"
                                                        if len(cuts) > 3 else ""))
        first = cuts[0] if cuts else None
        return Finding(
            Kind.PARTIAL_REQUEST, Severity.INFO, first.seq if first else 0,
            cuts[-1].seq if cuts else 0,
            f"This log is a piece: {'; '.join(parts)}. Those requests are recorded as what "
            "the lines show; what they did outside the piece is unknown.",
            ADVICE[Kind.PARTIAL_REQUEST],
            {"head_cut_tasks": head, "cut": [c.detail for c in cuts[:10]]},
            first.slot if first else None, first.turn if first else None,
            first.round if first else None)
