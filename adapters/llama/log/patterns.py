"""The message formats of llama-server's slot and speculative-decoding lines, as regular
expressions, and the pure functions that turn one matched message into a record.

Each pattern is the printf format of the pinned llama.cpp source (tools/server/
server-context.cpp, common/speculative.cpp) with its numbers captured; messages that the
ledger does not need but that are known (NOISE) are told apart from unknown ones, so a
format change in a newer server shows up as unknown lines instead of silently missing
records.
"""

import re
from collections.abc import Callable
from enum import Enum
from typing import Any

from adapters.llama.log.records import (
    Accepted,
    AccPerPos,
    Candidate,
    Checkpoint,
    Count,
    Decode,
    Draft,
    DrafterCalled,
    DrafterReset,
    DraftReuse,
    DraftTotals,
    LcpCheck,
    Past,
    Record,
    RecordKind,
    Released,
    SamplerChain,
    SamplerParams,
    SlotSelected,
    SpecStats,
    Stopped,
    StopReason,
    Timing,
    TimingPhase,
    Token,
    Verdict,
)
from adapters.logs.dispatch import Dispatch

K = RecordKind
_INT, _NUM = r"(-?\d+)", r"(-?[\d.]+)"
# Checkpoint geometry as create/restore/erase print it.
_GEOM = rf"pos_min = {_INT}, pos_max = {_INT}, n_tokens = {_INT}"

# process_token's `stopped ...` messages, by the reason each gives.
_STOPS = {"by EOS": StopReason.EOS, "by limit": StopReason.LIMIT,
          "due to running out of context": StopReason.CONTEXT,
          "by time limit": StopReason.TIME, "by indentation limit": StopReason.INDENT}

Builder = Callable[[re.Match[str], dict[str, Any]], Record]
Patterns = tuple[tuple[re.Pattern[str], Builder], ...]


def _f(m: re.Match[str], i: int) -> float:
    return float(m.group(i))


def _i(m: re.Match[str], i: int) -> int:
    return int(m.group(i))


def _erased(reason: str) -> Builder:
    return lambda m, c: Checkpoint(kind=K.CTX_ERASED, pos_min=_i(m, 1), pos_max=_i(m, 2),
                                   n_tokens=_i(m, 3), size_mib=_f(m, 4), reason=reason, **c)


def _timing(phase: TimingPhase) -> Builder:
    return lambda m, c: Timing(kind=K.TIMING, phase=phase, ms=_f(m, 1), tokens=_i(m, 2), **c)


def _reset(reason: str) -> Builder:
    return lambda m, c: DrafterReset(kind=K.DRAFTER_RESET, reason=reason, value=_f(m, 1), **c)


SLOT_PATTERNS: Patterns = tuple(
    (re.compile(p), b) for p, b in (
        # f_sim_best from 0.3.36 on, sim_best before.
        (rf"^selected slot by LCP similarity, (?:f_)?sim_best = {_NUM} \(> {_NUM} thold\), "
         rf"f_keep = {_NUM}",
         lambda m, c: SlotSelected(kind=K.SLOT_SELECTED, method="lcp", f_sim=_f(m, 1),
                                   f_keep=_f(m, 3), **c)),
        (r"^selected slot by (LRU|id)",
         lambda m, c: SlotSelected(kind=K.SLOT_SELECTED, method=m.group(1).lower(), **c)),
        (rf"^ - checking sim = {_NUM} \({_INT}/{_INT}\)",
         lambda m, c: LcpCheck(kind=K.LCP_CHECK, lcp=_i(m, 2), prompt=_i(m, 3), **c)),
        (rf"^processing task, is_child = {_INT}",
         lambda m, c: Count(kind=K.TASK_STARTED, n=_i(m, 1), **c)),
        (rf"^new prompt, n_ctx_slot = {_INT}, n_keep = {_INT}, task\.n_tokens = {_INT}",
         lambda m, c: Count(kind=K.PROMPT, n=_i(m, 3), **c)),
        # `cached ` from 0.3.24 on.
        (rf"^(?:cached )?n_tokens = {_INT}, memory_seq_rm \[{_INT}, end\)",
         lambda m, c: Count(kind=K.CACHED, n=_i(m, 1), **c)),
        # `, took N ms` in ik_llama.cpp.
        (rf"^created context checkpoint {_INT} of {_INT} \({_GEOM}, size = {_NUM} MiB"
         rf"(?:, took [\d.]+ ms)?\)",
         lambda m, c: Checkpoint(kind=K.CTX_CREATED, index=_i(m, 1), limit=_i(m, 2),
                                 pos_min=_i(m, 3), pos_max=_i(m, 4), n_tokens=_i(m, 5),
                                 size_mib=_f(m, 6), **c)),
        # `took N ms` before the parenthesis in ik_llama.cpp.
        (rf"^restored context checkpoint(?: took\s+[\d.]+ ms)? \({_GEOM}, n_past = {_INT}, "
         rf"size = {_NUM} MiB\)",
         lambda m, c: Checkpoint(kind=K.CTX_RESTORED, pos_min=_i(m, 1), pos_max=_i(m, 2),
                                 n_tokens=_i(m, 3), n_past=_i(m, 4), size_mib=_f(m, 5), **c)),
        (rf"^erased invalidated context checkpoint \({_GEOM}, n_swa = {_INT}, "
         rf"pos_next = {_INT}, size = {_NUM} MiB\)",
         lambda m, c: Checkpoint(kind=K.CTX_ERASED, pos_min=_i(m, 1), pos_max=_i(m, 2),
                                 n_tokens=_i(m, 3), size_mib=_f(m, 6), reason="invalidated",
                                 pos_next=_i(m, 5), n_swa=_i(m, 4), **c)),
        # ik_llama.cpp's names no slot length.
        (rf"^erased invalidated context checkpoint \(pos_min = {_INT}, pos_max = {_INT}, "
         rf"size = {_NUM} MiB\)",
         lambda m, c: Checkpoint(kind=K.CTX_ERASED, pos_min=_i(m, 1), pos_max=_i(m, 2),
                                 size_mib=_f(m, 3), reason="invalidated", **c)),
        (rf"^erasing old context checkpoint \({_GEOM}, size = {_NUM} MiB\)", _erased("old")),
        (rf"^erasing context checkpoint too close to an earlier one \({_GEOM}, "
         rf"size = {_NUM} MiB\)", _erased("too_close")),
        (rf"^superseding context checkpoint at n_tokens = {_INT}",
         lambda m, c: Checkpoint(kind=K.CTX_ERASED, n_tokens=_i(m, 1), reason="superseded",
                                 **c)),
        # `failed to truncate`: before 0.3.24 the memory could not drop the tail, so it is
        # cleared, a full re-processing too.
        (r"^(?:forcing full prompt re-processing|failed to truncate tokens with position "
         r">= -?\d+ - clearing the memory)", lambda m, c: Record(kind=K.FULL_REPROCESS, **c)),
        # The common prefix where the cache cannot be used as it is (a warning, any
        # verbosity, before 0.3.36 and in forks; n_swa is not printed by ik_llama.cpp).
        (rf"^n_past = {_INT}, slot\.prompt\.tokens\.size\(\) = {_INT}",
         lambda m, c: Past(kind=K.PAST, lcp=_i(m, 1), held=_i(m, 2), **c)),
        (rf"^n_past was set to {_INT}", lambda m, c: Count(kind=K.N_PAST_SET, n=_i(m, 1), **c)),
        # `checking` in builds after 0.3.36.
        (rf"^[Cc]hecking checkpoint with \[{_INT}, {_INT}\] against {_INT}\.\.\.",
         lambda m, c: Count(kind=K.CKPT_CHECK, n=_i(m, 3), **c)),
        # The draft model's share is logged from 0.3.24 on.
        (rf"^created speculative checkpoint \({_GEOM}, size = {_NUM} MiB"
         rf"(?:, draft = {_NUM} MiB)?\)",
         lambda m, c: Checkpoint(kind=K.SPEC_CREATED, pos_min=_i(m, 1), pos_max=_i(m, 2),
                                 n_tokens=_i(m, 3), size_mib=_f(m, 4),
                                 draft_mib=_f(m, 5) if m.group(5) is not None else None, **c)),
        (rf"^restoring speculative checkpoint \(pos_min = {_INT}, pos_max = {_INT}, "
         rf"size = {_INT}\)",
         lambda m, c: Checkpoint(kind=K.SPEC_RESTORED, pos_min=_i(m, 1), pos_max=_i(m, 2),
                                 size_mib=_i(m, 3) / 2**20, **c)),
        # Printed as the slot's drafter is about to be called (0.3.21 on).
        (rf"^max possible draft: {_INT}",
         lambda m, c: Count(kind=K.DRAFT_BEGIN, n=_i(m, 1), **c)),
        (rf"^generate_draft: id={_INT}, #tokens={_INT}, #draft={_INT}, pos_next={_INT}",
         lambda m, c: Draft(kind=K.DRAFT, last=_i(m, 1), n_tokens=_i(m, 2), n_draft=_i(m, 3),
                            pos_next=_i(m, 4), **c)),
        # 0.3.20 does not name the token, and counts it in the slot already.
        (rf"^slot decode token, (?:id={_INT}, )?n_ctx = {_INT}, n_tokens = {_INT}",
         lambda m, c: Decode(kind=K.DECODE, last=_i(m, 1) if m.group(1) is not None else None,
                             n_tokens=_i(m, 3), pushed=m.group(1) is None, **c)),
        (rf"^accepted {_INT}/{_INT} draft tokens, new n_tokens = {_INT}",
         lambda m, c: Verdict(kind=K.ROUND_DONE, accepted=_i(m, 1), drafted=_i(m, 2),
                              n_tokens=_i(m, 3), **c)),
        (r"^accepted\s+(\d+)/\s*(\d+) draft tokens( \(restore checkpoint\))?\s*$",
         lambda m, c: Verdict(kind=K.VERDICT, accepted=_i(m, 1), drafted=_i(m, 2),
                              restore=m.group(3) is not None, **c)),
        (rf"^add accepted tokens: sampled={_INT}, ids\.size={_INT}, n_draft={_INT}",
         lambda m, c: Accepted(kind=K.ACCEPTED, sampled=_i(m, 1), ids=_i(m, 2),
                               n_draft=_i(m, 3), **c)),
        # n_gen from 0.3.36 on, n_decoded before.
        (rf"^(?:n_gen|n_decoded) = {_INT}, n_remaining = {_INT}, next token:\s*{_INT} '",
         lambda m, c: Token(kind=K.TOKEN, n_gen=_i(m, 1), n_remaining=_i(m, 2),
                            token=_i(m, 3), **c)),
        (rf"^stopped ({'|'.join(_STOPS)})",
         lambda m, c: Stopped(kind=K.STOPPED, reason=_STOPS[m.group(1)], **c)),
        (rf"^\s*prompt eval time =\s*{_NUM} ms /\s*{_INT} tokens", _timing(TimingPhase.PROMPT)),
        (rf"^\s*eval time =\s*{_NUM} ms /\s*{_INT} tokens", _timing(TimingPhase.EVAL)),
        # `rate =` up to 0.3.21, `mean len` from 0.3.36 on.
        (rf"^draft acceptance(?: rate)? = {_NUM} \(\s*{_INT} accepted /\s*{_INT} "
         rf"generated\)(?:, mean len =\s*{_NUM})?",
         lambda m, c: DraftTotals(kind=K.DRAFT_TOTALS, ratio=_f(m, 1), accepted=_i(m, 2),
                                  generated=_i(m, 3),
                                  mean_len=_f(m, 4) if m.group(4) is not None else None, **c)),
        (r"^\s*acc per pos = \(([^)]*)\)",
         lambda m, c: AccPerPos(kind=K.ACC_PER_POS, rates=tuple(
             float(x) for x in m.group(1).split(",") if x.strip()), **c)),
        (r"^sampler chain: logits ((?:-> \S+ ?)*)$",
         lambda m, c: _chain(m.group(1), c)),
        (r"^sampler params:\s*$",
         lambda m, c: SamplerParams(kind=K.SAMPLER_PARAMS, params=(), **c)),
        (rf"^stop processing: n_tokens = {_INT}, truncated = {_INT}",
         lambda m, c: Released(kind=K.RELEASED, n_tokens=_i(m, 1), truncated=m.group(2) != "0",
                               **c)),
    )
)

# Known slot messages that carry nothing the ledger uses.
SLOT_NOISE = (
    "launching slot", "init sampler", "main/do_checkpoint",
    "checking checkpoint with", "new slot", " - skipping",
    "n_gen = ", "total time", "graphs reused",
    "need to evaluate at least 1 token", "waiting for parent", " - copying state",
    "clearing prompt", "saving idle slot", "__TEST_TAG", "alora", "trying to reuse chunks",
    "after context reuse", "reusing chunk", "only caching to alora", "cache reuse is not",
    "processing pre-alora", "stop prompt batch filling", "slot is not processing",
    "selected slot by", "clearing cache for lora", "keeping cache for alora",
    # builds before 0.3.36
    "ignoring small draft", "draft size ",
    "n_decoded = ", "the max possible draft", "prompt processing",
    "speculative decoding context initialized",
    # PR 22929's checkpoint placement; builds of early 2026
    "skip checkpoint at", "checkpoint before user input reached", "prompt done,",
)
# Known slot messages that begin with a number or a function name (builds before 0.3.24).
SLOT_NOISE_INSIDE = ("tokens since last checkpoint at", ": n_draft=")
_NOISE_STRIPPED = tuple(p.strip() for p in SLOT_NOISE)  # stripped once, not per line

# Speculative lines: 0.3.36 prefixes them `spec <func>: `, older builds `<func>: ` or nothing
# (logread strips either); candidates name their sequence from 0.3.24 on; 0.3.20/0.3.21
# name the drafters with underscores and reset ngram-mod after an en dash.
SPEC_PATTERNS: Patterns = tuple(
    (re.compile(p), b) for p, b in (
        (rf"^ - (?:seq_id {_INT}, )?draft candidate\s+{_INT}, pos\s+{_INT}:\s+{_INT} "
         rf"\(\s*{_NUM}\) '",
         lambda m, c: Candidate(kind=K.CANDIDATE, rank=_i(m, 2), pos=_i(m, 3), token=_i(m, 4),
                                prob=_f(m, 5),
                                **(c | {"slot": _i(m, 1) if m.group(1) is not None else None}))),
        (rf"^called impl ([\w-]+), hist size = {_INT}, call_count = {_INT}, gen = {_INT}",
         lambda m, c: DrafterCalled(kind=K.DRAFTER_CALLED, spec_type=m.group(1), hist=_i(m, 2),
                                    gen=_i(m, 4), **c)),
        (rf"^low acceptance streak \({_INT}\) [-\u2013] resetting ngram_mod",
         _reset("low_acceptance_streak")),
        (rf"^ngram_mod occupancy {_NUM} exceeds threshold", _reset("occupancy")),
        # `dur(b,g,a)`: the milliseconds of each kind of call (0.3.36 prints the mean
        # accepted length and the acceptance by position before it).
        (rf"^statistics\s+([\w-]+): #calls\(b,g,a\) =\s*{_INT}\s+{_INT}\s+{_INT}, "
         rf"#gen drafts =\s*{_INT}, #acc drafts =\s*{_INT}, #gen tokens =\s*{_INT}, "
         rf"#acc tokens =\s*{_INT}(?:.*?, dur\(b,g,a\) =\s*{_NUM},\s*{_NUM},\s*{_NUM} ms)?",
         lambda m, c: SpecStats(kind=K.SPEC_STATS, spec_type=m.group(1), calls_begin=_i(m, 2),
                                calls_draft=_i(m, 3), calls_accept=_i(m, 4),
                                gen_drafts=_i(m, 5), acc_drafts=_i(m, 6), gen_tokens=_i(m, 7),
                                acc_tokens=_i(m, 8),
                                draft_ms=_f(m, 10) if m.group(10) is not None else None, **c)),
        # 0.3.21's draft model (common_speculative_state_draft, LOG_DBG): its prefix reuse,
        # the reuse it drops when its checkpoint is gone, and the checkpoint deleted at each
        # request.
        (rf"^reuse_i = {_INT}, reuse_n = {_INT}, #prompt_dft = {_INT}, #prompt_cur = {_INT}",
         lambda m, c: DraftReuse(kind=K.DRAFT_REUSE, reuse_i=_i(m, 1), reuse_n=_i(m, 2),
                                 prompt_dft=_i(m, 3), prompt_cur=_i(m, 4), **c)),
        (rf"^no checkpoint available, no reuse, \(reuse_i={_INT}, reuse_n={_INT}\)",
         lambda m, c: DraftReuse(kind=K.DRAFT_CKPT_LOST, reuse_i=_i(m, 1), reuse_n=_i(m, 2),
                                 **c)),
        (rf"^delete checkpoint, prompt\.size={_INT}",
         lambda m, c: Count(kind=K.DRAFT_CKPT_DELETED, n=_i(m, 1), **c)),
    )
)


def _chain(text: str, c: dict[str, Any]) -> SamplerChain:
    names = text.replace("->", " ").split()
    return SamplerChain(kind=K.SAMPLER_CHAIN, active=tuple(n for n in names if n[0] != "?"),
                        idle=tuple(n[1:] for n in names if n[0] == "?"), **c)


_PARAM = re.compile(rf"(\w+) = {_NUM}")


def sampler_params(lines: list[str]) -> tuple[tuple[str, float], ...]:
    """The (name, value) pairs of the tab-indented lines after `sampler params:`."""
    return tuple((m.group(1), float(m.group(2))) for ln in lines for m in _PARAM.finditer(ln))


_SLOTS: Dispatch[Builder] = Dispatch(SLOT_PATTERNS)
_SPECS: Dispatch[Builder] = Dispatch(SPEC_PATTERNS)


def slot_record(message: str, ctx: dict[str, Any]) -> Record | None:
    """The record of one slot line's message (`ctx`: line, t, slot, task), or None when
    no pattern matches."""
    return _first_match(_SLOTS, message, ctx)


def _first_match(patterns: Dispatch[Builder], message: str, ctx: dict[str, Any]
                 ) -> Record | None:
    found = patterns.first(message)
    return None if found is None else found[1](found[0], ctx)


def is_slot_noise(message: str) -> bool:
    """Whether an unmatched slot message is a known one the ledger does not need (an empty
    message is `reset`'s)."""
    stripped = message.strip()
    return (not stripped or message.startswith(SLOT_NOISE)
            or stripped.startswith(_NOISE_STRIPPED)
            or any(p in message for p in SLOT_NOISE_INSIDE))


class ComputeMark(Enum):
    """A server-loop line around a decode call: the call (`srv decode: n_batch ...`, one
    per forward or prompt chunk), its bracket opening and closing."""

    CALL = "call"
    BEGIN = "begin"
    END = "end"


_YIELD = re.compile(r"^que\s+yield_to_que: (done )?yielding to queue")
_CALL = re.compile(r"^srv\s+decode: n_batch \(effective\)")


def compute_mark(body: str) -> ComputeMark | None:
    """Which server-loop line around a decode call `body` is; None: none of them."""
    if _CALL.match(body):
        return ComputeMark.CALL
    m = _YIELD.match(body)
    if m is None:
        return None
    return ComputeMark.END if m.group(1) is not None else ComputeMark.BEGIN


def spec_record(message: str, line: int, t: float | None) -> Record | None:
    """The record of one speculative-decoding line's message (its prefix stripped): a
    draft candidate (of the slot its seq_id names; None where the build names none), the
    drafter of the chain that drafted, an ngram-mod reset, a drafter's statistics, or
    0.3.21's draft-model reuse and checkpoint lines (all but candidates name no slot); None
    for the other spec lines."""
    return _first_match(_SPECS, message, {"line": line, "t": t, "slot": None, "task": None})


_PIECE = re.compile(r"(?:next token:\s*-?\d+|draft candidate.*\(\s*-?[\d.]+\)) '(.*)$")


def opens_piece(message: str) -> bool:
    """Whether a token or candidate message leaves its quoted piece open: the token's text
    held a newline, so the log line continues on the next physical line(s)."""
    m = _PIECE.search(message)
    return m is not None and "'" not in m.group(1)
