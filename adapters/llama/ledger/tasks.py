"""A llama-server log's requests and their speculative rounds, as the fold of its records
(adapters/llama/ledger/fold.py) builds them: what each task and round consists of, and what
a log that ends inside a task leaves of it."""

from dataclasses import dataclass, field
from enum import StrEnum

from adapters.llama.log.records import (
    Accepted,
    AccPerPos,
    Checkpoint,
    Count,
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
    StopReason,
    Timing,
    TimingPhase,
    Token,
    Verdict,
)

K = RecordKind
# Records of the prompt phase, kept in order: the ledger replays them as they happened.
PROMPT_PHASE = (K.CACHED, K.CTX_CREATED, K.CTX_RESTORED, K.CTX_ERASED, K.FULL_REPROCESS,
                K.N_PAST_SET)


@dataclass
class LlamaRound:
    """One round of one task. `n_tokens` is the slot length when it began; `drafted`
    the first verification's draft size (0: a plain step); `spec_type` the drafter of the
    chain that drafted (llama.cpp's name; None where the log does not say); `draft_ids` the
    drafted ids where the log names them (model drafters' candidate 0), else empty;
    `replays` the batch size of each verification after a speculative-checkpoint
    restore; `spec_gen` the draft size the drafter logged (larger than `drafted` where
    the server cut the draft to the answer's remaining tokens; None: not logged);
    `draft_recomputed` the history tokens the draft model recomputed before it
    because its checkpoint was gone (0.3.21's draft model logs it; 0 elsewhere);
    `draft_span` the log's times of the drafter's call: from `max possible draft` to the
    `called impl` line that names the drafter (None: the build logs neither)."""

    first_line: int
    t: float | None
    last: int | None
    n_tokens: int
    drafted: int = 0
    spec_type: str | None = None
    draft_ids: list[int] = field(default_factory=list)
    spec_ckpt: Checkpoint | None = None
    restores: list[Checkpoint] = field(default_factory=list)
    replays: list[int] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)
    kept: Accepted | None = None
    tokens: list[int] = field(default_factory=list)
    done: Verdict | None = None
    stop: StopReason | None = None
    last_line: int = 0
    t_end: float | None = None
    spec_gen: int | None = None
    draft_recomputed: int = 0
    draft_span: tuple[float, float] | None = None

    @property
    def speculative(self) -> bool:
        """Whether the round verified drafts."""
        return self.drafted > 0

    @property
    def complete(self) -> bool:
        """Whether every token the round kept was emitted, or the task stopped in it."""
        if not self.speculative:
            return len(self.tokens) == 1
        if self.kept is None:
            return False
        return self.done is not None or len(self.tokens) == self.kept.ids or (
            self.stop is not None and bool(self.tokens))


@dataclass
class LlamaTask:
    """One request on one slot: how the slot was chosen and reused, the sampler it was
    given (-v), the prompt phase in order, the first token, the rounds, and the engine's
    own totals: print_timing's, and each drafter's cumulative statistics printed with
    them (`spec_stats`, by llama.cpp's name)."""

    slot: int
    task: int
    first_line: int
    t: float | None
    selection: SlotSelected | None = None
    lcp: LcpCheck | None = None
    sampler_chain: SamplerChain | None = None
    sampler_params: SamplerParams | None = None
    prompt_tokens: int | None = None
    ckpt_threshold: int | None = None
    """The first `Checking checkpoint ... against T` threshold (T = the common prefix less
    n_swa + 1): the kept prefix where the log has no LCP line (builds before 0.3.36)."""
    past: Past | None = None
    """The prompt's common prefix with the slot's tokens where the server logs it without
    -v (its `n_past = N, slot.prompt.tokens.size() = M` warning; ik_llama.cpp's prompt-cache
    line): the kept prefix where the log has no LCP line."""
    prompt_phase: list[Record] = field(default_factory=list)
    first_token: Token | None = None
    rounds: list[LlamaRound] = field(default_factory=list)
    stop: StopReason | None = None
    timings: dict[TimingPhase, Timing] = field(default_factory=dict)
    totals: DraftTotals | None = None
    acc_per_pos: AccPerPos | None = None
    spec_stats: dict[str, SpecStats] = field(default_factory=dict)
    released: Released | None = None
    last_line: int = 0
    head_cut: bool = False
    """The log begins inside this task: its start, prompt phase and first rounds are
    before the log's first line, so only what the log shows of it is known."""
    error: str | None = None
    """The error the server sent the task's client (`send_error`), if any."""
    prompt_loaded: bool = False
    """The prompt cache put a saved prompt into the slot as the task started: what the slot
    holds is not what its last task left."""

    @property
    def tokens_seen(self) -> int:
        """The most tokens the log shows the task's slot holding: where a prompt batch
        began, a restore left it, or its release found it."""
        sizes = [r.n for r in self.prompt_phase if isinstance(r, Count)]
        sizes += [self.released.n_tokens] if self.released is not None else []
        return max(sizes, default=0)

    @property
    def n_past(self) -> int | None:
        """Tokens of the slot the prompt kept (the first `cached n_tokens`)."""
        cached = [r for r in self.prompt_phase if isinstance(r, Count) and r.kind is K.CACHED]
        return cached[0].n if cached else None

    @property
    def generated(self) -> int:
        """Tokens emitted (the first one included), as the log's token lines show them."""
        return (self.first_token is not None) + sum(len(r.tokens) for r in self.rounds)

    @property
    def generated_logged(self) -> int | None:
        """Tokens generated: the token lines' count, else print_timing's (a log without
        -v), else None."""
        if self.generated:
            return self.generated
        timing = self.timings.get(TimingPhase.EVAL)
        return timing.tokens if timing is not None else None


class CutReason(StrEnum):
    """Why a task's end is not in the log: the log (or the server run's part of it) ends
    while the task runs, or its slot takes another task first (the piece skips its end)."""

    LOG_ENDS = "log_ends"
    SLOT_REUSED = "slot_reused"


@dataclass(frozen=True)
class Truncation:
    """A task whose end the log does not show, last seen at `line` (`why`). Its last round,
    if the log cuts it, is taken out of the task's rounds (`partial`: it committed
    nothing) with the tokens it had emitted and the restores it had done by then."""

    slot: int
    task: int
    line: int
    partial: LlamaRound | None
    why: CutReason = CutReason.LOG_ENDS

    @property
    def dropped_tokens(self) -> int:
        """Tokens the partial round emitted before the log ends."""
        return len(self.partial.tokens) if self.partial is not None else 0

    def to_dict(self) -> dict[str, int | bool | str]:
        """JSON form (the stored provenance)."""
        p = self.partial
        return {"slot": self.slot, "task": self.task, "line": self.line, "why": self.why.value,
                "dropped_round": p is not None, "dropped_tokens": self.dropped_tokens,
                "restores": len(p.restores) if p is not None else 0}


@dataclass
class Overflow:
    """A KV cache with no room for a batch (a burst of `failed to find free space` lines
    from `first_line` to `last_line`, `exceeded` when the server gave up on the batch:
    `Context size has been exceeded`): the tasks in flight then, with the tokens each slot
    was seen to hold (slot, task, tokens), and the tasks the server failed for it."""

    first_line: int
    t: float | None
    last_line: int
    retries: int = 0
    exceeded: bool = False
    in_flight: list[tuple[int, int, int]] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """JSON form (the stored source's `overflows`)."""
        return {"first_line": self.first_line, "t": self.t, "last_line": self.last_line,
                "retries": self.retries, "exceeded": self.exceeded,
                "in_flight": [{"slot": s, "task": t, "tokens": n} for s, t, n in self.in_flight],
                "failed": self.failed}


@dataclass
class TaskFold:
    """The tasks in the order they started, what the log ends inside, the KV cache's
    overflows, records that
    belong to no started task (a log that begins mid-request), ngram-mod resets, and
    whether the log shows the draft model's prefix reuse (0.3.21 -v: then each round's
    `draft_recomputed` is known, else it is 0 for want of a line)."""

    tasks: list[LlamaTask] = field(default_factory=list)
    truncated: list[Truncation] = field(default_factory=list)
    overflows: list[Overflow] = field(default_factory=list)
    orphans: int = 0
    resets: int = 0
    draft_reuse_logged: bool = False
