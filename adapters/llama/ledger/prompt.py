"""The start of an imported turn: `start_turn` with the slot's reuse, the prompt phase in
log order (`ctx_restore` for a context-checkpoint restore or a full re-processing,
`prefill` per prompt batch, `ctx_save` where a context checkpoint was taken) and the
prefill that samples the first token; and the per-slot and per-turn state the ledger
keeps while it imports (adapters/llama/ledger/record.py). Payloads: fsm/payloads.py."""

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from adapters.llama.ledger.responses import ResponseFacts
from adapters.llama.ledger.rounds import MIB, Step
from adapters.llama.ledger.sampler import used
from adapters.llama.ledger.tasks import LlamaTask
from adapters.llama.log.records import Checkpoint, Count, Record, RecordKind, TimingPhase
from fsm.machine import RoundMachine
from fsm.payloads import CtxRestore, StartTurn
from fsm.states import Trigger
from fsm.turn_metrics import TurnMetrics

K = RecordKind
# Never in a llama-server log: time spent rolling back and restoring context state.
NOT_LOGGED = ("rollback_s", "repair_s")


@dataclass
class SlotState:
    """A slot across its turns: the server's slot length after its last task (None: the
    log began while it may have held something), our view of its tokens, the state's
    position after the last commit, and the history tokens its draft model has
    recomputed so far (0.3.21's draft model logs them)."""

    machine: RoundMachine
    length: int | None
    tokens: list[int | None] = field(default_factory=list)
    position: int = 0
    draft_recomputed: int = 0


@dataclass
class TurnState:
    """One turn being imported: its metrics (rounds, drafts and violations the fold's,
    eventlog/fold.py), what of them is unknown, and its prompt."""

    stats: TurnMetrics
    prompt: list[int | None]
    unknown: set[str] = field(default_factory=lambda: set(NOT_LOGGED))


def start_steps(s: SlotState, task: LlamaTask, prompt_ids: list[int] | None,
                resp: ResponseFacts | None, now: Callable[[], float], n_swa: int | None = None
                ) -> Generator[Step, None, TurnState]:
    """start_turn, the prompt phase and the prefill that samples the first token (`n_swa`:
    the target's sliding window, which turns a checkpoint check's threshold into the kept
    prefix)."""
    m = s.machine
    n_prompt = task.prompt_tokens or (resp.prompt_tokens if resp is not None else None)
    n_past = task.n_past if task.n_past is not None else (
        resp.cache_n if resp is not None else None)
    if prompt_ids is not None and len(prompt_ids) != n_prompt:
        prompt_ids = None  # tokenized otherwise than the server did: not this prompt
    prompt: list[int | None] = (list(prompt_ids) if prompt_ids is not None
                                else [None] * (n_prompt or 0))
    turn = TurnState(TurnMetrics(slot=task.slot, turn=m.turn, prompt_tokens=n_prompt or 0),
                 prompt)
    if task.prompt_loaded:
        s.length = None  # the prompt cache put a saved prompt of unknown length in the slot
    if task.past is not None and task.past.held is not None:
        s.length = task.past.held  # what the slot holds, as the server says
    kept = kept_prefix(task, s.length, n_swa)
    if kept is not None and s.length is not None:
        f_keep: float | None = kept / s.length if s.length else 1.0
    else:
        f_keep = task.selection.f_keep if task.selection is not None else None
    turn.stats.kept_tokens = kept or 0
    turn.stats.f_keep = f_keep if f_keep is not None else 1.0
    turn.unknown |= {name for name, v in (("kept_tokens", kept), ("f_keep", f_keep),
                                           ("prompt_tokens", n_prompt)) if v is None}
    payload: StartTurn = {"prompt_tokens": n_prompt, "kept": kept, "f_keep": f_keep,
                          "task": task.task, "n_past": n_past}
    sampler = used(task.sampler_chain, task.sampler_params)
    if sampler is not None:
        payload["sampler"] = sampler
    if task.selection is not None:
        payload["selected_by"] = task.selection.method
        if task.selection.f_keep is not None:
            payload["engine_f_keep"] = task.selection.f_keep
    if n_past is not None and n_prompt is not None:
        payload |= {"trim": n_past, "append": prompt[n_past:]}
        s.tokens = list(prompt)
    m.fire(Trigger.START_TURN, 0.0, payload)
    start, start_t = yield from _prompt_phase(task, s, turn, kept, now)
    generated = task.generated_logged or (resp.predicted_n if resp is not None else 0)
    timing = task.timings.get(TimingPhase.PROMPT)
    if n_prompt is None and start is not None and timing is not None:
        # No line names the prompt's size (ik_llama.cpp without -v), but its batches' starts
        # do, and its timing counts them all: the last batch is the rest.
        n_prompt = start + timing.tokens - turn.stats.prefill_tokens
    if n_prompt is not None and generated:
        first = task.first_token
        if first is not None:
            yield first.line, first.t
        tokens = n_prompt - start if start is not None else (timing.tokens if timing else 0)
        token = first.token if first is not None else None
        m.fire(Trigger.PREFILL, _since(now, start_t), {"tokens": tokens, "position": n_prompt,
                                                       "append": [token]})
        turn.stats.prefill_tokens += tokens
        s.tokens.append(token)
        s.position = n_prompt
    if timing is not None:
        turn.stats.prefill_s = timing.ms / 1e3
    return turn

def _prompt_phase(task: LlamaTask, s: SlotState, turn: TurnState, kept: int | None,
                  now: Callable[[], float]
                  ) -> Generator[Step, None, tuple[int | None, float | None]]:
    """ctx_restore, prefill batches and ctx_save in log order; returns (the last
    batch's start, its time). The checkpoints a restore invalidates are erased on the lines
    after it; a piece that shows only erasures shows the rollback they follow."""
    m = s.machine
    start: int | None = None
    start_t: float | None = None
    phase = task.prompt_phase
    timing = task.timings.get(TimingPhase.PROMPT)
    evaluated = timing.tokens if timing is not None else None
    for i, r in enumerate(phase):
        yield r.line, r.t
        if isinstance(r, Count) and r.kind is K.CACHED:
            if start is not None and r.n > start:
                m.fire(Trigger.PREFILL, _since(now, start_t), {"tokens": r.n - start,
                                                               "position": r.n})
                turn.stats.prefill_tokens += r.n - start
            start, start_t = r.n, r.t
        elif r.kind in (K.CTX_RESTORED, K.FULL_REPROCESS):
            _ctx_restore(m, r, s, turn, kept, _erasures(phase, i + 1), evaluated)
        elif (_is_invalidated(r) and not (i and _is_invalidated(phase[i - 1]))
              and not any(x.kind in (K.CTX_RESTORED, K.FULL_REPROCESS) for x in phase)):
            _ctx_restore(m, None, s, turn, kept, _erasures(phase, i), evaluated)
        elif isinstance(r, Checkpoint) and r.kind is K.CTX_CREATED:
            m.fire(Trigger.CTX_SAVE, 0.0, {"at": r.n_tokens, "index": r.index, "limit": r.limit,
                                           "bytes": round((r.size_mib or 0.0) * MIB)})
    return start, start_t


def _is_invalidated(r: Record) -> bool:
    return isinstance(r, Checkpoint) and r.kind is K.CTX_ERASED and r.reason == "invalidated"


def _erasures(phase: list[Record], at: int) -> list[Checkpoint]:
    """The checkpoints erased as invalidated on the lines from `at` on, up to the next
    line of another kind."""
    out = []
    for r in phase[at:]:
        if not _is_invalidated(r):
            break
        assert isinstance(r, Checkpoint)
        out.append(r)
    return out


def _ctx_restore(m: RoundMachine, r: Record | None, s: SlotState, turn: TurnState,
                 kept: int | None, erased: list[Checkpoint], evaluated: int | None) -> None:
    """A context-checkpoint restore, or a full re-processing (a reset), with the
    checkpoints it invalidated; `r` None: a piece that shows only those erasures, whose
    `pos_next` is where the slot goes on from."""
    ckpt = r if isinstance(r, Checkpoint) else None
    if r is None:
        position = next((e.pos_next for e in erased if e.pos_next is not None), None)
        if position is None:
            return  # an erasure that does not say where the slot goes on from
    else:
        position = ckpt.n_past or 0 if ckpt is not None else 0
    payload: CtxRestore = {"position": position, "from_position": s.length,
                           "reset": position == 0 if r is None else ckpt is None}
    if ckpt is not None:
        payload |= {"checkpoint": ckpt.n_tokens, "pos_min": ckpt.pos_min,
                    "pos_max": ckpt.pos_max, "bytes": round((ckpt.size_mib or 0.0) * MIB)}
    if erased:
        payload["erased"] = len(erased)
        newest = max((e.n_tokens or (e.pos_max or 0) + 1) for e in erased)
        payload["newest_erased"] = newest
    if r is None:
        payload["inferred"] = True
    if kept is not None:
        # The history the prompt shared with the slot, behind where the state went back to:
        # never more than the prompt evaluation the server timed.
        payload["reprefill"] = max(0, kept - position)
        if evaluated is not None:
            payload["reprefill"] = min(payload["reprefill"], evaluated)
        turn.stats.reprefill_tokens += payload["reprefill"]
    else:
        turn.unknown.add("reprefill_tokens")
    turn.stats.ctx_restores += 1
    m.fire(Trigger.CTX_RESTORE, 0.0, payload)

def _since(now: Callable[[], float], t: float | None) -> float:
    """Seconds from log time `t` to now (0 without timestamps)."""
    return max(0.0, now() - t) if t is not None else 0.0


def kept_prefix(task: LlamaTask, slot_length: int | None, n_swa: int | None) -> int | None:
    """The slot's tokens the new prompt keeps: the LCP line's count (0.3.36), else the
    common prefix the server warns of when its cache cannot be used as it is (`n_past =
    N, slot.prompt.tokens.size()`, any verbosity), else the first checkpoint check's
    threshold plus n_swa + 1 (server-context.cpp: `pos_min_thold = pos_next - n_swa - 1`,
    earlier builds), else where the prefill starts when nothing was rolled back (any
    verbosity), 0 for an empty slot, else None (unknown)."""
    if task.lcp is not None:
        return task.lcp.lcp
    if task.past is not None:
        return task.past.lcp
    if n_swa is None:  # the erase lines print it where the log shows no model load
        n_swa = next((r.n_swa for r in task.prompt_phase
                      if isinstance(r, Checkpoint) and r.n_swa is not None), None)
    if task.ckpt_threshold and n_swa is not None:
        # A threshold of 0 is clamped: the prefix lies anywhere up to n_swa + 1.
        return task.ckpt_threshold + n_swa + 1
    if task.n_past is not None and not any(r.kind in (K.CTX_RESTORED, K.FULL_REPROCESS)
                                           for r in task.prompt_phase):
        return task.n_past  # nothing rolled back: where the prefill starts is what was kept
    return 0 if slot_length == 0 else None
