"""Draft-model checkpoints discarded between requests (llama.cpp PR 22521).

A recurrent draft model keeps its own state and checkpoints. If they are dropped at every
new completion request, the draft model recomputes its state over the whole conversation
at the next draft: long recomputes in large agentic sessions. The drafter's cumulative
`draft_recomputed` counter in each DRAFT payload shows when that happened.
"""

from typing import Any

from eventlog.postmortem.advice import ADVICE
from eventlog.postmortem.detector import DURATION, SLOT, TURN, Handler, Row, examples
from eventlog.postmortem.finding import Finding, Kind, Severity
from fsm.payloads import Draft
from fsm.states import Trigger

T = Trigger


class DraftCheckpoints:
    """Charges each increase of `draft_recomputed` to the draft where it happened."""

    counter = "draft_recomputed"
    """The payload field without which a DRAFT tells this detector nothing."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.policy = config.get("draft_checkpoints", "?")
        self._last: dict[int, int] = {}
        self._request_start: dict[int, bool] = {}
        self.rows: list[dict[str, Any]] = []
        self.requests = 0

    def handlers(self) -> dict[Trigger, Handler]:
        """START_TURN marks a request boundary; DRAFT carries the counter."""
        return {T.START_TURN: self._on_start, T.DRAFT: self._on_draft}

    def _on_start(self, row: Row, _: object) -> None:
        self._request_start[row[SLOT]] = row[TURN] > 1

    def _on_draft(self, row: Row, draft: Draft) -> None:
        total = draft.get(self.counter)
        if total is None:
            return
        seq, slot, turn, rnd = row[:4]
        at_start = self._request_start.pop(slot, False)
        self.requests += at_start
        delta = total - self._last.get(slot, 0)
        self._last[slot] = total
        if delta > 0:
            self.rows.append({"seq": seq, "slot": slot, "turn": turn,
                              "round": rnd, "recomputed": delta,
                              "request_start": at_start, "draft_s": row[DURATION],
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
            ADVICE[Kind.DRAFT_CHECKPOINT_DISCARD],
            {"requests_affected": len(starts), "requests": self.requests,
             "recomputed_tokens": total,
             "recomputed_mid_request": sum(r["recomputed"] for r in self.rows) - total,
             "draft_s": round(sum(r["draft_s"] for r in starts), 6),
             "draft_checkpoints": self.policy, "per_request": examples(starts)},
            first["slot"], first["turn"], first["round"])]
