"""The engine's own numbers against the fold of the imported rounds: every disagreement
becomes an invariant violation (bookkeeping) in the ledger, never a silent correction.

Per round, the log says what a verification accepted twice: `add accepted tokens` (the
kept ids, the target's own last, and the batch's draft size) and the verdict lines
(`accepted a/k draft tokens`: the round's end, and under LLAMA_TRACE each verification,
a partial one restoring the speculative checkpoint). server-context.cpp prints both from
the same numbers, so they must agree: a = ids - 1 (less the correction a replay verified
again), k = the batch's draft size, and a restore's replay verifies the a accepted drafts
and the correction again (a batch of a + 1).

llama-server counts per task (print_timing): drafted tokens over the first verification
of each round, accepted drafts (`n_accepted`, a replay's own token not counted), the
speculative rounds (`mean len = 1 + accepted / rounds`) and the share of rounds that
accepted at least i drafts (`acc per pos`, over all speculative rounds, 3 decimals). Its
answers (`timings`) repeat the counts and add the reuse (`cache_n`).
"""

from collections.abc import Sequence

from adapters.llama.ledger.responses import ResponseFacts
from adapters.llama.ledger.tasks import LlamaRound
from adapters.llama.log.records import AccPerPos, DraftTotals, StopReason, Verdict
from fsm.draft_profile import DraftProfile
from fsm.invariants import Invariant, Violation

RATE_TOLERANCE = 0.0005  # the log prints rates with 3 decimals
MEAN_TOLERANCE = 0.005   # and the mean length with 2


def _violation(check: str, source: str, engine: object, ledger: object) -> Violation:
    return Violation(Invariant.BOOKKEEPING,
                     f"llama-server's {check} ({source}) is {engine}, the imported rounds "
                     f"give {ledger}",
                     {"check": check, "source": source, "engine": engine, "ledger": ledger})


def totals_violations(profile: DraftProfile, totals: DraftTotals | None,
                      per_pos: AccPerPos | None) -> list[Violation]:
    """print_timing's totals of one task against its rounds (the mean accepted length only
    where the build prints it)."""
    out: list[Violation] = []
    if totals is not None:
        for check, engine, ledger in (("drafted tokens", totals.generated, profile.drafted),
                                      ("accepted tokens", totals.accepted, profile.accepted)):
            if engine != ledger:
                out.append(_violation(check, "print_timing", engine, ledger))
        mean_len = profile.mean_accept_len or 1.0  # without a speculative round, 1
        # Builds before 0.3.36 print no mean length: that one check is not made.
        if totals.mean_len is not None and abs(totals.mean_len - mean_len) > (
                MEAN_TOLERANCE + 1e-9):
            out.append(_violation("mean accepted length", "print_timing", totals.mean_len,
                                  round(mean_len, 4)))
    elif profile.rounds:
        out.append(_violation("drafted tokens", "print_timing", "not logged", profile.drafted))
    if per_pos is not None and profile.rounds:
        ours = [profile.rate_at(i + 1) for i in range(len(per_pos.rates))]
        if any(abs(a - b) > RATE_TOLERANCE + 1e-9
               for a, b in zip(per_pos.rates, ours, strict=True)):
            out.append(_violation("acceptance per draft position", "print_timing",
                                  list(per_pos.rates), [round(r, 4) for r in ours]))
    return out


def _verdict(line: int, said: tuple[int, int], kept: tuple[int, int], what: str
             ) -> Violation:
    return Violation(Invariant.BOOKKEEPING,
                     f"llama-server's line {line} says accepted {said[0]}/{said[1]} draft "
                     f"tokens, {what} gives {kept[0]}/{kept[1]}",
                     {"check": "round verdict", "source": f"log line {line}",
                      "engine": list(said), "ledger": list(kept)})


def verdict_violations(rnd: LlamaRound) -> list[Violation]:
    """A whole round's verdict lines against its `add accepted tokens` line and replays."""
    if rnd.kept is None:
        return []
    kept = rnd.kept
    n_accepted = kept.ids - 1
    if rnd.restores and n_accepted > 0:
        n_accepted -= 1  # the correction the replay verified again is not a draft accepted
    out: list[Violation] = []
    if rnd.done is not None and (rnd.done.accepted, rnd.done.drafted) != (n_accepted,
                                                                          kept.n_draft):
        out.append(_verdict(rnd.done.line, (rnd.done.accepted, rnd.done.drafted),
                            (n_accepted, kept.n_draft), f"its line {kept.line} (add "
                            f"accepted tokens: ids.size={kept.ids}, n_draft={kept.n_draft})"))
    batches = [rnd.drafted, *rnd.replays]
    for i, v in enumerate(rnd.verdicts):
        out += _trace_verdict(rnd, v, i, batches)
    return out


def _trace_verdict(rnd: LlamaRound, v: Verdict, i: int, batches: list[int]
                   ) -> list[Violation]:
    """One LLAMA_TRACE verdict: the i-th verification's (batch size `batches[i]`)."""
    drafted = batches[i] if i < len(batches) else None
    if v.restore:
        replay = rnd.replays[i] if i < len(rnd.replays) else None
        if replay is None or (v.accepted + 1, v.drafted) == (replay, drafted):
            return []
        return [_verdict(v.line, (v.accepted, v.drafted), (replay - 1, drafted or 0),
                         f"the replay after it ({replay} tokens verified again)")]
    kept = rnd.kept
    assert kept is not None
    if (v.accepted, v.drafted) == (kept.ids - 1, kept.n_draft):
        return []
    return [_verdict(v.line, (v.accepted, v.drafted), (kept.ids - 1, kept.n_draft),
                     f"its line {kept.line} (add accepted tokens: ids.size={kept.ids})")]


# The OpenAI finish reason of each way a task can stop.
FINISH = {StopReason.EOS: "stop", StopReason.LIMIT: "length", StopReason.CONTEXT: "length"}


def response_violations(resp: ResponseFacts, *, n_past: int | None, prompt: int | None,
                        generated: int | None, drafted: int | None, accepted: int | None,
                        stop: StopReason | None) -> list[Violation]:
    """One answer's `timings` and finish reason against what the log shows of its task
    (None: not shown; a stream's last chunk carries no finish reason)."""
    finish = FINISH.get(stop) if stop is not None and resp.finish_reason else None
    pairs: Sequence[tuple[str, object, object]] = (
        ("cache_n", resp.cache_n, n_past),
        ("prompt tokens", resp.prompt_tokens, prompt),
        ("predicted_n", resp.predicted_n, generated),
        ("draft_n", resp.draft_n, drafted),
        ("draft_n_accepted", resp.draft_accepted, accepted),
        ("finish_reason", resp.finish_reason, finish),
    )
    return [_violation(check, f"response {resp.index}", engine, ledger)
            for check, engine, ledger in pairs if ledger is not None and engine != ledger]
