"""The typed records a llama-server log holds: one dataclass per kind of line that says
something about a slot's state transaction (tools/server/server-context.cpp and
common/speculative.cpp of the pinned llama.cpp name each format).

Every record carries where it came from (`line`, 1-based) and what the line's prefix
said: `t`, seconds since the server started (None when the log has no timestamps), the
slot and the task (-1 while the slot is still being chosen). Fields are the line's own
numbers, never derived ones.
"""

from dataclasses import dataclass
from enum import StrEnum

from adapters.llama.log.server_lines import ServerEventKind


class RecordKind(StrEnum):
    """What one parsed line records."""

    SLOT_SELECTED = "slot_selected"        # get_available_slot: LCP similarity / LRU / id
    LCP_CHECK = "lcp_check"                # " - checking sim = s (lcp/prompt)"
    TASK_STARTED = "task_started"          # "processing task"
    PROMPT = "prompt"                      # "new prompt, ... task.n_tokens = N"
    CACHED = "cached"                      # "cached n_tokens = N, memory_seq_rm [p0, end)"
    CKPT_CHECK = "ckpt_check"              # "Checking checkpoint with [a, b] against T..."
    PAST = "past"                          # "n_past = N, slot.prompt.tokens.size() = M, ..."
    CTX_CREATED = "ctx_created"            # "created context checkpoint i of n (...)"
    CTX_RESTORED = "ctx_restored"          # "restored context checkpoint (...)"
    CTX_ERASED = "ctx_erased"              # "erased invalidated" / "erasing old" / ...
    FULL_REPROCESS = "full_reprocess"      # "forcing full prompt re-processing"
    N_PAST_SET = "n_past_set"              # "n_past was set to N"
    SPEC_CREATED = "spec_created"          # "created speculative checkpoint (...)"
    SPEC_RESTORED = "spec_restored"        # "restoring speculative checkpoint (...)"
    CANDIDATE = "candidate"                # spec: " - seq_id s, draft candidate c, pos p"
    DRAFT_BEGIN = "draft_begin"            # get_n_draft_: "max possible draft: N"
    DRAFT = "draft"                        # "generate_draft: id=, #tokens=, #draft="
    DECODE = "decode"                      # "slot decode token, id=, n_tokens ="
    VERDICT = "verdict"                    # LLAMA_TRACE: "accepted a/k draft tokens[ (..)]"
    ACCEPTED = "accepted"                  # "add accepted tokens: sampled=, ids.size="
    ROUND_DONE = "round_done"              # "accepted a/k draft tokens, new n_tokens = N"
    TOKEN = "token"                        # "n_gen = g, n_remaining = r, next token: id"
    STOPPED = "stopped"                    # "stopped by EOS" / "stopped by limit" / ...
    TIMING = "timing"                      # print_timing: prompt eval / eval time
    DRAFT_TOTALS = "draft_totals"          # "draft acceptance = r (a accepted / g generated)"
    ACC_PER_POS = "acc_per_pos"            # "acc per pos = (r1, r2, ...)"
    RELEASED = "released"                  # "stop processing: n_tokens = N, truncated = b"
    DRAFTER_RESET = "drafter_reset"        # spec: ngram_mod cleared (streak / occupancy)
    DRAFTER_CALLED = "drafter_called"      # spec: "called impl T, hist size = n, ..."
    SAMPLER_CHAIN = "sampler_chain"        # "sampler chain: logits -> ... -> dist"
    SAMPLER_PARAMS = "sampler_params"      # "sampler params:" and its tab-indented lines
    SPEC_STATS = "spec_stats"              # spec: "statistics T: #calls(b,g,a) = ..."
    DRAFT_REUSE = "draft_reuse"            # 0.3.21 draft model: "reuse_i = , reuse_n = "
    DRAFT_CKPT_LOST = "draft_ckpt_lost"    # 0.3.21: "no checkpoint available, no reuse"
    DRAFT_CKPT_DELETED = "draft_ckpt_deleted"  # 0.3.21: "begin: delete checkpoint"
    COMPUTE = "compute"                    # que: "yielding to queue" .. "done yielding"
    SERVER = "server"                      # srv: an error, an HTTP error, KV cache full, ...
    PROMPT_LOADED = "prompt_loaded"        # srv: "- found better prompt with f_keep = ..."


class StopReason(StrEnum):
    """Why a task stopped generating (process_token's `stopped ...` lines)."""

    EOS = "eos"
    LIMIT = "limit"
    CONTEXT = "context"
    TIME = "time"
    INDENT = "indent"


class TimingPhase(StrEnum):
    """Which print_timing line."""

    PROMPT = "prompt"
    EVAL = "eval"


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """Fields every record has."""

    kind: RecordKind
    line: int
    t: float | None
    slot: int | None
    task: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotSelected(Record):
    """The server chose this slot for the next task: `method` is lcp, lru or id;
    `f_sim` and `f_keep` (3 decimals in the log) only for lcp."""

    method: str
    f_sim: float | None = None
    f_keep: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LcpCheck(Record):
    """The common prefix of this slot's tokens and the new prompt, exactly."""

    lcp: int
    prompt: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Count(Record):
    """A record whose content is one count: PROMPT (task.n_tokens), CACHED (n_tokens
    kept when a prompt batch begins), N_PAST_SET, CKPT_CHECK (the
    threshold a context checkpoint is checked against: the common prefix less n_swa + 1),
    TASK_STARTED (is_child), DRAFT_CKPT_DELETED (the new request's prompt size; 0.3.21's
    draft model, no slot), DRAFT_BEGIN (the most the slot may draft: its drafter is called next)."""

    n: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Past(Record):
    """The prompt's common prefix with the slot's tokens (`lcp`) and what the slot held
    (`held`; None where the line does not say), as the server warns of it when its cache
    cannot be used as it is (`n_past = N, slot.prompt.tokens.size() = M`, any verbosity),
    or ik_llama.cpp's prompt cache line (`cache_size = M, n_past = N`)."""

    lcp: int
    held: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint(Record):
    """A context or speculative checkpoint created, restored or erased. `n_tokens` is the
    slot length it belongs to (None where the line omits it); `size_mib` the saved
    state (a spec restore logs bytes, converted); `draft_mib` the draft model's share
    of a speculative one; `reason` why a context checkpoint was erased (and `pos_next`, the
    position the slot goes on from, which it lies beyond, and the target's sliding window
    `n_swa` the line prints); `n_past` the prefix kept after
    a context restore; `index`/`limit` of a created context one."""

    pos_min: int | None = None
    pos_max: int | None = None
    n_tokens: int | None = None
    size_mib: float | None = None
    draft_mib: float | None = None
    n_past: int | None = None
    reason: str = ""
    index: int | None = None
    limit: int | None = None
    pos_next: int | None = None
    n_swa: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate(Record):
    """One of the top draft candidates at draft position `pos` (candidate 0 is the token
    drafted there); `slot` is the line's seq_id."""

    rank: int
    pos: int
    token: int
    prob: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Draft(Record):
    """A verify batch about to run: the last sampled token `last`, the slot's length
    `n_tokens` and `n_draft` draft tokens behind it."""

    last: int
    n_tokens: int
    n_draft: int
    pos_next: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Decode(Record):
    """A plain step: the last sampled token `last` alone (None: the line does not name
    it, as 0.3.20's does not), at slot length `n_tokens` as logged: before the token, or
    with it where `pushed` (0.3.20 adds it to the slot before it logs the line)."""

    last: int | None
    n_tokens: int
    pushed: bool = False

    @property
    def position(self) -> int:
        """The slot length before the token."""
        return self.n_tokens - self.pushed


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict(Record):
    """`accepted` of `drafted` draft tokens: a verification's outcome (`restore` when the
    partial acceptance restores the speculative checkpoint), or the end of a round
    (ROUND_DONE, with the slot's new length `n_tokens`)."""

    accepted: int
    drafted: int
    restore: bool = False
    n_tokens: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Accepted(Record):
    """The verification kept `ids` tokens (accepted drafts and the target's own), the last
    being `sampled`; `n_draft` were verified."""

    sampled: int
    ids: int
    n_draft: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Token(Record):
    """Token `token` emitted as the task's `n_gen`-th."""

    n_gen: int
    n_remaining: int
    token: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Stopped(Record):
    """The task stopped generating."""

    reason: StopReason


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing(Record):
    """print_timing: `ms` spent on `tokens` tokens of the prompt or the generation."""

    phase: TimingPhase
    ms: float
    tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DraftTotals(Record):
    """The engine's own draft totals for the task (`mean_len`: None where the build does
    not print it, before 0.3.36)."""

    ratio: float
    accepted: int
    generated: int
    mean_len: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AccPerPos(Record):
    """The engine's acceptance rate at each draft position (3 decimals)."""

    rates: tuple[float, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Released(Record):
    """The task ended; the slot holds `n_tokens` tokens."""

    n_tokens: int
    truncated: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class DrafterReset(Record):
    """ngram-mod cleared its pool: `reason` says why (a low-acceptance streak, or the
    pool's occupancy); `value` is the streak length or the occupancy."""

    reason: str
    value: float


@dataclass(frozen=True, slots=True, kw_only=True)
class DrafterCalled(Record):
    """The drafter of llama.cpp's chain that produced a draft (`spec_type`, llama.cpp's
    name): `gen` tokens after a history of `hist` tokens. The line names no slot; the
    verify batch it drafted for has the same history length and draft size."""

    spec_type: str
    hist: int
    gen: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplerChain(Record):
    """The sampler chain the slot's next task samples with, in order: the samplers that
    act (`active`, llama.cpp's names; `dist` draws) and those in the chain that its
    parameters leave idle (`idle`, printed with a `?`)."""

    active: tuple[str, ...]
    idle: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SamplerParams(Record):
    """The sampling parameters of the slot's next task, as printed (3 decimals):
    (name, value) pairs in the order of the log's lines."""

    params: tuple[tuple[str, float], ...]

    def get(self, name: str) -> float | None:
        """One parameter's value (None: not printed)."""
        return next((v for k, v in self.params if k == name), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpecStats(Record):
    """One drafter's cumulative statistics since the server started, printed after each
    task (`statistics T: ...`): calls to begin/draft/accept, drafts made and accepted
    (at least partly), tokens drafted and accepted (as the server passed them to accept);
    `draft_ms` the milliseconds its draft calls took (None: the build does not print it)."""

    spec_type: str
    calls_begin: int
    calls_draft: int
    calls_accept: int
    gen_drafts: int
    acc_drafts: int
    gen_tokens: int
    acc_tokens: int
    draft_ms: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DraftReuse(Record):
    """The draft model's prefix reuse before drafting (0.3.21, names no slot): `reuse_n`
    tokens of its own history from `reuse_i` match the target's `prompt_cur` tokens; for
    DRAFT_CKPT_LOST the reuse it drops because its checkpoint is gone: it clears its
    state and recomputes those tokens."""

    reuse_i: int
    reuse_n: int
    prompt_dft: int | None = None
    prompt_cur: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Compute(Record):
    """A compute bracket of the server loop (0.3.36 -v: `yielding to queue` as a decode
    call starts, `done yielding to queue` as it returns; `t` the end, `t_begin` the start,
    names no slot). `chained`: it began right after another bracket ended, with no
    decode call (`srv decode: n_batch ...`) nor parsed line between: the drafter's own
    pass over a forward's output (the MTP head after a verify or over the prompt)."""

    t_begin: float | None
    chained: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Server(Record):
    """A server-level line that bears on the run's requests (an error sent to a task, an
    HTTP answer other than success, a KV cache with no room, a crash, the shutdown): what
    it says (`what`), an HTTP status where it gives one, its text; `task` is the task the
    line names (None: none)."""

    what: ServerEventKind
    status: int | None = None
    text: str = ""
