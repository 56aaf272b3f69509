"""Stray tokens behind EOG and the re-prefill they cause (llama.cpp #28049).

A legacy EOG policy commits the whole accepted block and looks for the stop token only
afterwards, so accepted drafts behind EOG stay in the slot. The next prompt then no
longer extends the slot, the recurrent state (which cannot be trimmed) falls back to an
older context checkpoint, and the whole previous answer is prefilled again. Context
restores that stray tokens do not explain are reported on their own.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from eventlog.postmortem.detector import config_value, examples
from eventlog.postmortem.finding import Finding, Kind, Severity
from fsm import payloads as pl
from fsm.event import Event
from fsm.invariants import Invariant
from fsm.states import Trigger

T = Trigger


@dataclass
class _StrayTurn:
    slot: int
    turn: int
    first_seq: int = 0
    last_seq: int = 0
    round: int = 0
    stray: int = 0
    answer: int = 0
    reprefill: int = 0
    f_keep: float | None = None
    checkpoint: int | None = None
    tokens: list[int] = field(default_factory=list)

    def note(self, ev: Event, n: int, tokens: list[int]) -> None:
        """`n` stray tokens (`tokens`) left behind EOG by event `ev`."""
        if not self.stray:
            self.first_seq, self.round = ev.seq, ev.round
        self.stray += n
        self.tokens.extend(tokens)
        self.last_seq = ev.seq

    def row(self) -> dict[str, Any]:
        """The turn as a per-turn example of the finding."""
        return {"slot": self.slot, "turn": self.turn, "stray": self.stray,
                "stray_tokens": self.tokens[:8], "answer": self.answer,
                "reprefill": self.reprefill, "f_keep_next": self.f_keep}


class EogTail:
    """Finds turns that left tokens behind EOG and charges them the next turn's re-prefill."""

    triggers = (T.START_TURN, T.PREFILL, T.ACCEPT, T.REJECT, T.COMMIT, T.END_TURN,
                T.CTX_RESTORE, T.INVARIANT_VIOLATION)

    def __init__(self, config: dict[str, Any]) -> None:
        self.policy = config_value(config, "eog_policy", "?")
        self._len: dict[int, int] = defaultdict(int)
        self._eog: dict[int, int | None] = {}
        self._turn: dict[int, _StrayTurn] = {}
        self._awaiting: dict[int, _StrayTurn] = {}  # stray turns whose next turn has begun
        self._start: dict[int, tuple[int, int, float]] = {}  # slot -> (kept, old length, f_keep)
        self.strays: list[_StrayTurn] = []
        self.other: list[dict[str, Any]] = []

    def feed(self, ev: Event) -> None:
        """Fold one event."""
        slot, trig = ev.slot, ev.trigger
        if trig is T.COMMIT:
            commit: pl.Commit = ev.payload
            block = commit["append"]
            self._len[slot] += len(block)
            eog = self._eog.pop(slot, None)
            if eog is not None and len(block) > eog + 1:
                self._current(ev).note(ev, len(block) - eog - 1, block[eog + 1:])
        elif trig is T.ACCEPT or trig is T.REJECT:
            verdict: pl.Accept = ev.payload  # a Reject has the same `eog`
            self._eog[slot] = verdict["eog"]
        elif trig is T.PREFILL:
            prefill: pl.Prefill = ev.payload
            self._len[slot] += len(prefill.get("append", ()))
        elif trig is T.START_TURN:
            self._start_turn(ev)
        elif trig is T.END_TURN:
            cur = self._turn.pop(slot, None)
            if cur is not None and cur.stray:
                end: pl.EndTurn = ev.payload
                cur.answer = end["metrics"]["generated_tokens"] or 0
                self.strays.append(cur)
                self._awaiting[slot] = cur
        elif trig is T.CTX_RESTORE:
            self._ctx_restore(ev)
        else:
            v: pl.InvariantViolation = ev.payload
            if v["invariant"] != Invariant.SLOT_PREFIX.value:
                return
            cur = self._current(ev)
            if not cur.stray:  # no EOG index in the log: the violation is the evidence
                stray = list(v["details"]["stray"])
                cur.note(ev, len(stray), stray)

    def _current(self, ev: Event) -> _StrayTurn:
        cur = self._turn.get(ev.slot)
        if cur is None or cur.turn != ev.turn:
            cur = self._turn[ev.slot] = _StrayTurn(ev.slot, ev.turn)
        return cur

    def _start_turn(self, ev: Event) -> None:
        p: pl.StartTurn = ev.payload
        slot = ev.slot
        old = self._len[slot]
        self._len[slot] = p.get("trim", old) + len(p.get("append", ()))
        kept = p["kept"]
        f_keep = p["f_keep"]
        self._start[slot] = (kept, old, f_keep)
        waiting = self._awaiting.get(slot)
        if waiting is not None and waiting.turn == ev.turn - 1:
            waiting.f_keep = f_keep
            waiting.last_seq = max(waiting.last_seq, ev.seq)
        else:
            self._awaiting.pop(slot, None)

    def _ctx_restore(self, ev: Event) -> None:
        p: pl.CtxRestore = ev.payload
        slot = ev.slot
        reprefill = p.get("reprefill", 0)
        waiting = self._awaiting.pop(slot, None)
        if waiting is not None and waiting.turn == ev.turn - 1:
            waiting.reprefill += reprefill
            waiting.checkpoint = p["position"]
            waiting.last_seq = ev.seq
            return
        kept, old, f_keep = self._start.get(slot, (0, 0, 1.0))
        self.other.append({"seq": ev.seq, "slot": slot, "turn": ev.turn, "round": ev.round,
                           "reprefill": reprefill, "kept": kept, "slot_len": old,
                           "f_keep": f_keep, "checkpoint": p["position"],
                           "reset": p["reset"]})

    def finish(self) -> list[Finding]:
        """At most one finding per kind, with per-turn examples."""
        out = []
        if self.strays:
            out.append(self._stray_finding())
        if self.other:
            out.append(self._reprefill_finding())
        return out

    def _stray_finding(self) -> Finding:
        s = self.strays
        total = sum(t.stray for t in s)
        reprefill = sum(t.reprefill for t in s)
        charged = [t for t in s if t.reprefill]
        f_keeps = [t.f_keep for t in s if t.f_keep is not None]
        text = (f"{total} accepted token(s) stayed in the slot behind EOG in {len(s)} turn(s) "
                f"(eog_policy {self.policy}: the whole accepted block was committed and only "
                "then walked for the stop token), so the slot no longer equals the transcript.")
        if charged:
            ex = charged[0]
            answer = ex.answer - 1  # the visible answer ends with its EOG
            text += (f" The next prompt then no longer extended the slot (f_keep down to "
                     f"{min(f_keeps):.4f}); the recurrent state cannot be trimmed, so it fell "
                     f"back to an older context checkpoint and {reprefill} history tokens were "
                     f"prefilled again: turn {ex.turn + 1} re-prefilled {ex.reprefill} tokens "
                     f"after a {answer}-token answer (answer + {ex.reprefill - answer}).")
        else:
            text += " No later turn reused the slot here, so no re-prefill was paid yet."
        first = s[0]
        return Finding(
            Kind.EOG_STRAY_TOKENS, Severity.ERROR, first.first_seq,
            max(t.last_seq for t in s), text,
            "Cut the accepted block at the first EOG before any rollback accounting "
            "(--eog-policy truncate; llama.cpp #28049, PR #28232).",
            {"turns": len(s), "stray_tokens": total, "max_stray": max(t.stray for t in s),
             "reprefill_tokens": reprefill, "turns_reprefilled": len(charged),
             "answer_tokens": sum(t.answer for t in charged),
             "min_f_keep": min(f_keeps) if f_keeps else None, "eog_policy": self.policy,
             "per_turn": examples([t.row() for t in s])},
            first.slot, first.turn, first.round)

    def _reprefill_finding(self) -> Finding:
        o = self.other
        total = sum(r["reprefill"] for r in o)
        ex = o[0]
        return Finding(
            Kind.HISTORY_REPREFILL, Severity.WARNING, ex["seq"], o[-1]["seq"],
            f"{len(o)} turn(s) began with a context restore that stray tokens do not explain: "
            f"the live state had consumed tokens the new prompt does not share, so {total} "
            f"history tokens were prefilled again (turn {ex['turn']}: kept {ex['kept']} of "
            f"{ex['slot_len']}, back to the checkpoint at {ex['checkpoint']}, "
            f"{ex['reprefill']} tokens).",
            "Keep the slot equal to the transcript at every turn end; save context "
            "checkpoints closer to the prompt end (--ctx-checkpoint-every).",
            {"restores": len(o), "reprefill_tokens": total, "per_turn": examples(o)},
            ex["slot"], ex["turn"], ex["round"])
