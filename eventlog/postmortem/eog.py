"""Stray tokens behind EOG and the re-prefill they cause (llama.cpp #28049).

A legacy EOG policy commits the whole accepted block and looks for the stop token only
afterwards, so accepted drafts behind EOG stay in the slot. The next prompt then no
longer extends the slot, the recurrent state (which cannot be trimmed) falls back to an
older context checkpoint, and the whole previous answer is prefilled again. Context
restores that stray tokens do not explain are reported on their own: what the prompt
shared with the slot, where the state went back to, the tokens and seconds prefilled
again, and whose doing it was (the client's changed history, or a server that rolled back
a history the prompt matched whole, or a build known for that).
"""

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from eventlog.postmortem.advice import ADVICE, CAUSE_ADVICE, Cause
from eventlog.postmortem.detector import (
    ROUND,
    SEQ,
    SLOT,
    TURN,
    Handler,
    Row,
    examples,
)
from eventlog.postmortem.finding import Finding, Kind, Severity
from fsm import payloads as pl
from fsm.invariants import Invariant
from fsm.states import Trigger

T = Trigger
REPREFILL_SLACK = 8
"""A restore that prefills at most this many shared tokens again is how checkpoints work
(llama.cpp places them a few tokens before a prompt's end: 4 in ggerganov's reference log of
PR 23269), not a finding, unless the
prompt matched everything the slot held: then any rollback is the server's own."""


def _secs(seconds: float) -> str:
    """`41.3 s`, or `12 ms` under a second."""
    return f"{seconds:.1f} s" if seconds >= 1 else f"{seconds * 1e3:.0f} ms"


def _whole(kept: int | None, held: int | None) -> bool:
    """Whether a prompt shared everything its slot held (llama.cpp's common prefix stops one
    short of the slot's last token, which it evaluates again)."""
    return kept is not None and held is not None and kept >= held - 1


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
    stop: str | None = None  # a stop other than EOG (a length limit) the tokens stay behind

    def note(self, row: Row, n: int, tokens: list[int]) -> None:
        """`n` stray tokens (`tokens`) left behind EOG by the event `row`."""
        if not self.stray:
            self.first_seq, self.round = row[SEQ], row[ROUND]
        self.stray += n
        self.tokens.extend(tokens)
        self.last_seq = row[SEQ]

    def row(self) -> dict[str, Any]:
        """The turn as a per-turn example of the finding."""
        return {"slot": self.slot, "turn": self.turn, "stray": self.stray,
                "stray_tokens": self.tokens[:8], "answer": self.answer,
                "reprefill": self.reprefill, "f_keep_next": self.f_keep}


class EogTail:
    """Finds turns that left tokens behind EOG and charges them the next turn's re-prefill."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.policy = config.get("eog_policy", "?")
        # An engine configured to keep no prefix (vLLM with speculation on CPU) re-prefills
        # every turn's history by design, not because the state consumed something else.
        self.no_prefix: str | None = (config.get("prefix_caching_off_why")
                                      if config.get("prefix_caching") is False else None)
        self.engine = config.get("engine", "the engine")
        self._len: dict[int, int] = defaultdict(int)
        self._eog: dict[int, int | None] = {}
        self._turn: dict[int, _StrayTurn] = {}
        self._awaiting: dict[int, _StrayTurn] = {}  # stray turns whose next turn has begun
        self._start: dict[int, dict[str, Any]] = {}  # slot -> the turn's start_turn
        self._reprefill_s: dict[tuple[int, int], float] = {}
        self.known_bug = next((i for i in config.get("known_incidents", [])
                               if i.get("finding") == Kind.HISTORY_REPREFILL.value
                               and i.get("status") == "exposed"), None)
        self.strays: list[_StrayTurn] = []
        self.stop_strays: list[_StrayTurn] = []
        self.other: list[dict[str, Any]] = []

    def handlers(self) -> dict[Trigger, Handler]:
        """The slot's length, each verdict's EOG index and the commit after it, turns.

        The commit and verdict handlers, which see every round, are closures over the
        per-slot dicts."""
        lengths = self._len
        eogs = self._eog
        pop_eog = eogs.pop

        def on_commit(row: Row, commit: pl.Commit) -> None:
            slot = row[SLOT]
            block = commit["append"]
            lengths[slot] += len(block)
            eog = pop_eog(slot, None)
            if eog is not None and len(block) > eog + 1:
                self._current(row).note(row, len(block) - eog - 1, block[eog + 1:])

        def on_verdict(row: Row, verdict: pl.Accept) -> None:
            eogs[row[SLOT]] = verdict["eog"]  # a Reject has the same `eog`

        return {T.COMMIT: on_commit, T.ACCEPT: on_verdict, T.REJECT: on_verdict,
                T.PREFILL: self._on_prefill, T.START_TURN: self._start_turn,
                T.END_TURN: self._on_end, T.CTX_RESTORE: self._ctx_restore,
                T.INVARIANT_VIOLATION: self._on_violation}

    def _on_prefill(self, row: Row, prefill: pl.Prefill) -> None:
        self._len[row[SLOT]] += len(prefill.get("append", ()))

    def _on_end(self, row: Row, end: pl.EndTurn) -> None:
        slot = row[SLOT]
        if end["metrics"].get("reprefill_s"):
            self._reprefill_s[(slot, row[TURN])] = end["metrics"]["reprefill_s"]
        cur = self._turn.pop(slot, None)
        if cur is not None and cur.stray:
            cur.answer = end["metrics"]["generated_tokens"] or 0
            (self.stop_strays if cur.stop else self.strays).append(cur)
            self._awaiting[slot] = cur

    def _on_violation(self, row: Row, v: pl.InvariantViolation) -> None:
        if v["invariant"] != Invariant.SLOT_PREFIX.value:
            return
        cur = self._current(row)
        if not cur.stray:  # no EOG index in the log: the violation is the evidence
            stray = list(v["details"]["stray"])
            cur.note(row, len(stray), stray)
            cur.stop = v["details"].get("stop")

    def _current(self, row: Row) -> _StrayTurn:
        slot, turn = row[SLOT], row[TURN]
        cur = self._turn.get(slot)
        if cur is None or cur.turn != turn:
            cur = self._turn[slot] = _StrayTurn(slot, turn)
        return cur

    def _start_turn(self, row: Row, p: pl.StartTurn) -> None:
        seq, slot, turn = row[:3]
        old = self._len[slot]
        self._len[slot] = p.get("trim", old) + len(p.get("append", ()))
        self._start[slot] = dict(p)
        waiting = self._awaiting.get(slot)
        if waiting is not None and waiting.turn == turn - 1:
            waiting.f_keep = p["f_keep"]
            waiting.last_seq = max(waiting.last_seq, seq)
        else:
            self._awaiting.pop(slot, None)

    def _ctx_restore(self, row: Row, p: pl.CtxRestore) -> None:
        seq, slot, turn, rnd = row[:4]
        reprefill = p.get("reprefill", 0)
        waiting = self._awaiting.pop(slot, None)
        if waiting is not None and waiting.turn == turn - 1:
            waiting.reprefill += reprefill
            waiting.checkpoint = p["position"]
            waiting.last_seq = seq
            return
        start = self._start.get(slot, {})
        held = p.get("from_position")
        if not reprefill or (reprefill <= REPREFILL_SLACK and not _whole(start.get("kept"),
                                                                          held)):
            return
        self.other.append({"seq": seq, "slot": slot, "turn": turn, "round": rnd,
                           "reprefill": reprefill, "kept": start.get("kept"),
                           "prompt": start.get("prompt_tokens"), "task": start.get("task"),
                           "slot_len": held, "checkpoint": p["position"],
                           "reset": p["reset"]})

    def finish(self) -> list[Finding]:
        """At most one finding per kind, with per-turn examples."""
        kinds = ((self.strays, self._stray_finding),
                 (self.stop_strays, self._stop_stray_finding),
                 (self.other, self._reprefill_finding))
        return [finding() for seen, finding in kinds if seen]

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
        return _turns_finding(Kind.EOG_STRAY_TOKENS, s, text, {
            "turns": len(s), "stray_tokens": total, "max_stray": max(t.stray for t in s),
            "reprefill_tokens": reprefill, "turns_reprefilled": len(charged),
            "answer_tokens": sum(t.answer for t in charged),
            "min_f_keep": min(f_keeps) if f_keeps else None, "eog_policy": self.policy})

    def _stop_stray_finding(self) -> Finding:
        s = self.stop_strays
        total, first = sum(t.stray for t in s), s[0]
        reprefill = sum(t.reprefill for t in s)
        return _turns_finding(
            Kind.STOP_STRAY_TOKENS, s,
            f"{total} token(s) stayed in the slot behind a {first.stop} stop in {len(s)} "
            f"turn(s): the stop fell inside a verified block, the whole block went into the "
            f"slot and the state, and only the answer's head was sent, so the slot no longer "
            f"equals the transcript ({reprefill} history tokens prefilled again because of "
            f"it). Not an EOG: #28049's fix would not remove these.",
            {"turns": len(s), "stray_tokens": total, "stop": first.stop,
             "reprefill_tokens": reprefill})

    def _reprefill_finding(self) -> Finding:
        o = self.other
        for r in o:
            r["seconds"] = self._reprefill_s.get((r["slot"], r["turn"]))
        total = sum(r["reprefill"] for r in o)
        seconds = sum(r["seconds"] or 0.0 for r in o)
        ex = max(o, key=lambda r: r["reprefill"])
        whole = [r for r in o if _whole(r["kept"], r["slot_len"])]
        where = ("re-processed it from the start" if ex["reset"] else
                 f"went back to the checkpoint at {ex['checkpoint']:,}")
        text = (f"{len(o)} turn(s) prefilled history again: {total:,} tokens the prompts "
                f"shared with their slots" + (f" ({_secs(seconds)} at each prompt's prefill "
                                              "rate)" if seconds else "") + ". The largest: "
                f"turn {ex['turn']} (slot {ex['slot']}"
                + (f", task {ex['task']}" if ex["task"] is not None else "")
                + f"): its prompt shared {ex['kept']:,} tokens with the slot"
                + (f" (of {ex['slot_len']:,} it held)" if ex["slot_len"] else "")
                + f", yet the state {where}, so {ex['reprefill']:,} were prefilled again"
                + (f" ({_secs(ex['seconds'])})." if ex["seconds"] else "."))
        if self.no_prefix is not None:
            text += f" {self.engine} kept no prefix in this configuration ({self.no_prefix})."
            fix = CAUSE_ADVICE[Cause.NO_PREFIX_CACHE]
        elif self.known_bug is not None:
            text += (f" This build has {self.known_bug['key']} ({self.known_bug['title']}); "
                     f"its fix: {self.known_bug['fix']}.")
            fix = CAUSE_ADVICE[Cause.KNOWN_BUILD_BUG]
        elif len(whole) == len(o):
            text += (" Each of these prompts matched everything the slot held: the rollback "
                     "was the server's, not a changed history.")
            fix = CAUSE_ADVICE[Cause.SERVER_ROLLBACK]
        else:
            if whole:
                text += (f" In {len(whole)} of them the prompt matched everything the slot "
                         "held (a rollback of the server's); in the rest the history the "
                         "client sent differed from what the slot held.")
            fix = ADVICE[Kind.HISTORY_REPREFILL]
        return Finding(
            Kind.HISTORY_REPREFILL, Severity.WARNING, o[0]["seq"], o[-1]["seq"], text, fix,
            {"restores": len(o), "reprefill_tokens": total,
             "reprefill_s": round(seconds, 3) if seconds else None,
             "whole_history_matched": len(whole), "per_turn": examples(o)},
            ex["slot"], ex["turn"], ex["round"])


def _turns_finding(kind: Kind, s: list[_StrayTurn], text: str, numbers: dict[str, Any]
                   ) -> Finding:
    """The error `kind` over the stray turns `s`: `numbers`, then each turn quoted."""
    first = s[0]
    return Finding(kind, Severity.ERROR, first.first_seq, max(t.last_seq for t in s), text,
                   ADVICE[kind], {**numbers, "per_turn": examples([t.row() for t in s])},
                   first.slot, first.turn, first.round)
