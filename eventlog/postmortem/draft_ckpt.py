"""Draft-model checkpoints discarded between requests (llama.cpp PR 22521).

A recurrent draft model keeps its own state and checkpoints. If they are dropped at every
new completion request, the draft model recomputes its state over the whole conversation
at the next draft: long recomputes in large agentic sessions. The drafter's cumulative
`draft_recomputed` counter in each DRAFT payload shows when that happened.
"""

from typing import Any

from eventlog.postmortem.detector import config_value, examples
from eventlog.postmortem.finding import Finding, Kind, Severity
from fsm.event import Event
from fsm.payloads import Draft
from fsm.states import Trigger

T = Trigger


class DraftCheckpoints:
    """Charges each increase of `draft_recomputed` to the draft where it happened."""

    triggers = (T.START_TURN, T.DRAFT)

    def __init__(self, config: dict[str, Any]) -> None:
        self.policy = config_value(config, "draft_checkpoints", "?")
        self._last: dict[int, int] = {}
        self._request_start: dict[int, bool] = {}
        self.rows: list[dict[str, Any]] = []
        self.requests = 0

    def feed(self, ev: Event) -> None:
        """Fold one event."""
        if ev.trigger is T.START_TURN:
            self._request_start[ev.slot] = ev.turn > 1
            return
        draft: Draft = ev.payload
        total = draft.get("draft_recomputed")
        if total is None:
            return
        at_start = self._request_start.pop(ev.slot, False)
        self.requests += at_start
        delta = total - self._last.get(ev.slot, 0)
        self._last[ev.slot] = total
        if delta > 0:
            self.rows.append({"seq": ev.seq, "slot": ev.slot, "turn": ev.turn,
                              "round": ev.round, "recomputed": delta,
                              "request_start": at_start, "draft_s": ev.duration,
                              "draft_position": draft.get("draft_position")})

    def finish(self) -> list[Finding]:
        """A warning when the draft state was rebuilt at request boundaries."""
        starts = [r for r in self.rows if r["request_start"]]
        if not starts:
            return []
        total = sum(r["recomputed"] for r in starts)
        first = starts[0]
        per_turn = ", ".join(f"turn {r['turn']}: {r['recomputed']}" for r in starts[:4])
        return [Finding(
            Kind.DRAFT_CHECKPOINT_DISCARD, Severity.WARNING, first["seq"], starts[-1]["seq"],
            f"At {len(starts)} of {self.requests} later request(s) the draft model rebuilt its "
            f"state over the conversation: {total} history tokens recomputed by the draft "
            f"model ({per_turn}), {sum(r['draft_s'] for r in starts):.3f} s in those drafts. "
            f"Its checkpoints did not survive the request boundary (draft_checkpoints "
            f"{self.policy}).",
            "Keep the draft model's checkpoints across the requests of a slot and restore the "
            "newest one at or before the common prefix (--draft-checkpoints keep; llama.cpp "
            "PR 22521).",
            {"requests_affected": len(starts), "requests": self.requests,
             "recomputed_tokens": total,
             "recomputed_mid_request": sum(r["recomputed"] for r in self.rows) - total,
             "draft_s": round(sum(r["draft_s"] for r in starts), 6),
             "draft_checkpoints": self.policy, "per_request": examples(starts)},
            first["slot"], first["turn"], first["round"])]
