"""The event payloads: one typed payload per `Trigger`, the contract docs/events.md tables.

Each is a `TypedDict`, so a payload is the plain dict the log stores: writers build dict
literals, readers index them, nothing is converted (docs/events.md#why-dicts). A key is
required or `NotRequired` (absent: not applicable, or unknown to the source); a required
`X | None` key is always stored, None meaning unknown. Each field is `Annotated` with its
`Field`. `fsm.payload_schema.check_payload` tells whether a dict is its trigger's payload.
"""

from dataclasses import dataclass, fields
from typing import Annotated, Any, NotRequired, TypedDict

from fsm.states import Trigger
from fsm.turn_metrics import KEY, RATES, TurnMetrics

EVENT_SCHEMA_VERSION = 2
"""The version of the event schema: these payloads and the tables of eventlog/schema.py,
which stores it in every ledger. Bump it on any incompatible change, and say what changed
in docs/events.md#versions."""


@dataclass(frozen=True, slots=True)
class Field:
    """What a payload field means (`doc`), its `unit`, and how comparisons treat it:
    `timing` fields are never compared, `digest` fields only on the same device."""

    doc: str
    unit: str = ""
    timing: bool = False
    digest: bool = False


TokenIds = list[int | None]
"""Token ids; None where an imported log does not show the id."""

_TOKENS = "tokens"
_POS = "position"


_f = Field  # short: a field a line, mostly


# --- the round transaction (engine/round.py, adapters/llama/ledger/rounds.py) ----------------


class Begin(TypedDict):
    """A round opens and takes the checkpoint its strategy needs."""

    strategy: Annotated[str, _f("the rollback strategy (engine/config.py `Strategy`)")]
    position: Annotated[int, _f("state position at the round's start", _POS)]
    bytes: NotRequired[Annotated[int, _f(
        "size of the checkpoint taken (0: none); absent where the log does not size it",
        "bytes")]]
    draft_bytes: NotRequired[Annotated[int, _f(
        "the draft model's share of `bytes` (llama-server speculative checkpoints)",
        "bytes")]]
    tensors: NotRequired[Annotated[int, _f(
        "blocking tensor copies the checkpoint took (llama.cpp's host path: one per state "
        "tensor); absent: none counted", "count")]]


class Draft(TypedDict):
    """The drafter's proposal; a drafter with a state of its own adds its numbers."""

    drafts: Annotated[TokenIds, _f("the drafted tokens, in order (may be empty)", _TOKENS)]
    drafter: Annotated[str | None, _f("the drafter's name (a chain: names joined by commas; "
                                      "an imported round: the one its log names, None "
                                      "where it names none)")]
    draft_position: NotRequired[Annotated[int, _f(
        "draft-model: tokens its state has consumed after drafting (invariant 6)", _POS)]]
    draft_recomputed: NotRequired[Annotated[int, _f(
        "draft-model: history tokens recomputed so far (cumulative; PR 22521)", _TOKENS)]]
    draft_replayed: NotRequired[Annotated[int, _f(
        "draft-model: accepted drafts re-processed after its round restore (cumulative)",
        _TOKENS)]]


# The shared forward of the batched schedule (engine/scheduler.py): on VERIFY, DECODE and
# RETRY, and only under `--schedule batched` (a sequential session has none of them).
_BatchId = Annotated[int, _f("batched schedule: the shared forward's number in the session "
                             "(the same on every slot's event from that forward)", "index")]
_BatchSlots = Annotated[int, _f("batched schedule: slots whose rows that forward held",
                                "count")]
_BatchTokens = Annotated[int, _f("batched schedule: tokens of that forward, every row's",
                                 _TOKENS)]


class Verify(TypedDict):
    """One target forward over `[tokens[-1], d1..dk]` (docs/design.md#positions)."""

    drafts: Annotated[TokenIds, _f("the drafts verified", _TOKENS)]
    targets: NotRequired[Annotated[TokenIds, _f(
        "the target's token after each batch position (`targets[i]` checks `drafts[i]`); "
        "absent for a round an imported log ends inside", _TOKENS)]]
    batch: Annotated[int, _f("tokens in the verify batch (drafts + 1)", _TOKENS)]
    drafted: Annotated[int, _f("the round's draft size k", _TOKENS)]
    batch_id: NotRequired[_BatchId]
    batch_slots: NotRequired[_BatchSlots]
    batch_tokens: NotRequired[_BatchTokens]


class Decode(TypedDict):
    """A plain step: the last committed token alone, no draft."""

    targets: Annotated[TokenIds, _f("the target's next token (empty: a cut-off log)",
                                    _TOKENS)]
    drafted: Annotated[int, _f("always 0", _TOKENS)]
    batch: Annotated[int, _f("always 1", _TOKENS)]
    batch_id: NotRequired[_BatchId]
    batch_slots: NotRequired[_BatchSlots]
    batch_tokens: NotRequired[_BatchTokens]


class Retry(TypedDict):
    """`reverify` only: the same drafts verified again after a replay disagreed."""

    drafts: Annotated[TokenIds, _f("the drafts verified again", _TOKENS)]
    targets: Annotated[TokenIds, _f("the target's tokens this time", _TOKENS)]
    batch: Annotated[int, _f("tokens in the verify batch", _TOKENS)]
    batch_id: NotRequired[_BatchId]
    batch_slots: NotRequired[_BatchSlots]
    batch_tokens: NotRequired[_BatchTokens]


class Accept(TypedDict):
    """Every draft matched."""

    matched: Annotated[int, _f("drafts equal to the target's tokens", _TOKENS)]
    eog: Annotated[int | None, _f("index of the end-of-generation token in the block "
                                  "(None: none)", "index")]


class Reject(TypedDict):
    """A draft did not match: the speculative region must be undone."""

    matched: Annotated[int, _f("drafts accepted before the first mismatch", _TOKENS)]
    eog: Annotated[int | None, _f("index of the EOG in the block (None: none)", "index")]
    cut: Annotated[int, _f("accepted tokens dropped behind the EOG (eog_policy truncate)",
                           _TOKENS)]


class Restore(TypedDict):
    """The state brought back towards the accepted boundary."""

    mode: Annotated[str, _f(
        "checkpoint | select (per_token) | discard (input_replay) | reverify_mismatch")]
    index: NotRequired[Annotated[int, _f("select: the verified position whose state is "
                                         "kept", "index")]]
    bytes: NotRequired[Annotated[int, _f("state bytes moved; absent where not logged",
                                         "bytes")]]
    tensors: NotRequired[Annotated[int, _f(
        "checkpoint: blocking tensor copies the restore took (llama.cpp's host path); "
        "absent: none counted", "count")]]
    position: Annotated[int, _f("state position after the restore", _POS)]
    at: NotRequired[Annotated[int, _f("reverify_mismatch: the batch index that differed",
                                      "index")]]
    expected: NotRequired[Annotated[int, _f("reverify_mismatch: the verification's token",
                                            "token")]]
    actual: NotRequired[Annotated[int, _f("reverify_mismatch: the replay's token", "token")]]
    logged: NotRequired[Annotated[bool, _f(
        "False: implied by the imported log (llama-server's per-sequence select), not shown")]]
    n_rs_seq: NotRequired[Annotated[int | None, _f(
        "llama-server's recurrent states per sequence (None: not in the log)")]]


class Replay(TypedDict):
    """Reconstruction of the kept tokens after a restore (or, `reverify`, a new verdict)."""

    mode: Annotated[str, _f("reconstruct | reverify (the replay policy) | recurrence "
                            "(input_replay)")]
    tokens: Annotated[int, _f("tokens run through the state", _TOKENS)]
    guard: NotRequired[Annotated[bool, _f("True: the forward-progress guard ended a "
                                          "livelock with this reconstruction")]]


class Commit(TypedDict):
    """The round's block joins the slot."""

    append: Annotated[TokenIds, _f("tokens appended to the slot", _TOKENS)]
    position: Annotated[int, _f("state position after the commit", _POS)]
    digest: NotRequired[Annotated[str, _f("digest of the recurrent state at `position`; "
                                          "absent where the source has none", digest=True)]]
    accepted: Annotated[int, _f("drafts accepted (the block less the target's token)",
                                _TOKENS)]
    cut: Annotated[int, _f("accepted tokens dropped behind an EOG", _TOKENS)]


class Next(TypedDict):
    """The round is closed; no payload."""


class Livelock(TypedDict):
    """The forward-progress guard found a round restoring without progress (#28060)."""

    position: Annotated[int, _f("the position restored again and again", _POS)]
    restores: Annotated[int, _f("restores at it", "count")]
    cycle: Annotated[list[str], _f("the states of the repeating cycle")]
    resolution: Annotated[str, _f("how the guard ended it (reconstruct)")]


# --- turns and slots (engine/turn.py, adapters/llama/ledger/prompt.py) ------------------------


class StartTurn(TypedDict):
    """A request arrives: the slot keeps its common prefix with the prompt."""

    trim: NotRequired[Annotated[int, _f("cut the slot's tokens to this length (before "
                                        "`append`)", _TOKENS)]]
    append: NotRequired[Annotated[TokenIds, _f("the prompt's tokens after the kept prefix",
                                               _TOKENS)]]
    prompt_tokens: Annotated[int | None, _f("the prompt's length", _TOKENS)]
    kept: Annotated[int | None, _f("the slot prefix kept (longest common prefix)", _TOKENS)]
    f_keep: Annotated[float | None, _f("kept / slot length (1.0 for an empty slot)",
                                       "ratio")]
    task: NotRequired[Annotated[int, _f("llama-server's task id")]]
    n_past: NotRequired[Annotated[int | None, _f("llama-server's n_past: the prefix its "
                                                 "cache reused", _TOKENS)]]
    selected_by: NotRequired[Annotated[str, _f("how llama-server chose the slot")]]
    engine_f_keep: NotRequired[Annotated[float, _f("llama-server's own f_keep", "ratio")]]
    log_begins_inside: NotRequired[Annotated[bool, _f(
        "True: an imported log begins inside this request (its start is not in the log)")]]
    sampler: NotRequired[Annotated[dict[str, Any], _f(
        "imported with -v: the sampler llama-server used for the request, in our terms "
        "(temperature, top_k, top_p, min_p, the acting samplers we have no parameter for "
        "`others`, their `order`, the log's `chain`)")]]


class Prefill(TypedDict):
    """A chunk of the prompt runs through the model; the last samples the first token."""

    tokens: Annotated[int, _f("prompt tokens processed", _TOKENS)]
    position: Annotated[int, _f("state position after the chunk", _POS)]
    digest: NotRequired[Annotated[str, _f("state digest at `position`", digest=True)]]
    append: NotRequired[Annotated[TokenIds, _f("the last chunk: the first answer token",
                                               _TOKENS)]]


class CtxSave(TypedDict):
    """A context checkpoint of the state is saved."""

    at: Annotated[int, _f("the position saved", _POS)]
    index: NotRequired[Annotated[int | None, _f("llama-server's checkpoint index")]]
    limit: NotRequired[Annotated[int | None, _f("llama-server's checkpoint limit")]]
    bytes: Annotated[int, _f("checkpoint size", "bytes")]


class CtxRestore(TypedDict):
    """The recurrent state goes back to a context checkpoint, or to nothing (`reset`)."""

    position: Annotated[int, _f("state position after the restore", _POS)]
    digest: NotRequired[Annotated[str, _f("state digest at `position`", digest=True)]]
    reprefill: NotRequired[Annotated[int, _f(
        "history tokens to process again; absent where the log cannot tell", _TOKENS)]]
    from_position: Annotated[int | None, _f("the state's position before (None: unknown)",
                                            _POS)]
    reset: Annotated[bool, _f("True: no checkpoint fit, the state starts empty")]
    checkpoint: NotRequired[Annotated[int | None, _f("llama-server: the checkpoint's slot "
                                                     "length", _TOKENS)]]
    pos_min: NotRequired[Annotated[int | None, _f("llama-server: its first position", _POS)]]
    pos_max: NotRequired[Annotated[int | None, _f("llama-server: its last position", _POS)]]
    bytes: NotRequired[Annotated[int, _f("llama-server: its size", "bytes")]]
    erased: NotRequired[Annotated[int, _f("llama-server: context checkpoints erased as "
                                          "invalidated (they lie beyond `position`)")]]
    newest_erased: NotRequired[Annotated[int, _f("llama-server: the slot length of the "
                                                 "newest of them", _TOKENS)]]
    inferred: NotRequired[Annotated[bool, _f(
        "True: the log shows only the erasures (a piece): the rollback to `position` is "
        "read from them")]]


def _figures() -> dict[str, Any]:
    """`TurnMetrics`' fields and rates as row fields: each but `KEY`'s None where unknown."""
    declared = [(f.name, f.type, f.metadata) for f in fields(TurnMetrics)]
    rates = [(name, float, meta) for name, meta in RATES.items()]
    return {name: Annotated[tp if name in KEY else tp | None, Field(**meta)]
            for name, tp, meta in declared + rates}


TurnMetricsRow = TypedDict("TurnMetricsRow", {
    **_figures(),
    "unknown": NotRequired[Annotated[list[str], _f("imported: the figures the log cannot "
                                                   "give")]],
    "task": NotRequired[Annotated[int, _f("imported: llama-server's task id")]],
    "stop": NotRequired[Annotated[str | None, _f("imported: llama-server's stop reason")]],
    "error": NotRequired[Annotated[str, _f("imported: the error the server sent the client "
                                           "(llama-server's `send_error`; an interval log's "
                                           "HTTP error status)")]],
    "mean_accept_len": NotRequired[Annotated[float, _f(
        "imported, the rounds not in the log: llama-server's own mean accepted length "
        "(print_timing)", "tokens")]],
    "acc_per_pos": NotRequired[Annotated[list[float], _f(
        "imported, the rounds not in the log: llama-server's own acceptance at each draft "
        "position (print_timing's `acc per pos`, logged at -lv 4 and up)", "ratio")]],
    "answer_ids": NotRequired[Annotated[TokenIds, _f(
        "imported, the rounds not in the log: the answer's ids as the engine reported them "
        "(vLLM's stream, where its steps could not be placed)", _TOKENS)]],
})
TurnMetricsRow.__doc__ = """`fsm/turn_metrics.py` `TurnMetrics.to_dict()`, whose fields and rates
give its first keys. An imported log's unknown figure is None and named in `unknown`."""

class EndTurn(TypedDict):
    """The turn is over: its metrics."""

    metrics: Annotated[TurnMetricsRow, _f("the turn's measurements")]


class Fail(TypedDict):
    """The run failed: the slot goes to `failed`."""

    error: Annotated[str, _f("the error, one line")]
    truncated: NotRequired[Annotated[bool, _f("True: an imported log does not show the "
                                              "task's end")]]
    cut: NotRequired[Annotated[str, _f("why not: `log_ends` (the log ends inside the task), "
                                       "`slot_reused` (the slot takes another task first), "
                                       "`server_died` (the server's run ends without its "
                                       "shutdown)")]]


class InvariantViolation(TypedDict):
    """An invariant failed (docs/design.md#invariants; `fsm.invariants.Violation`)."""

    invariant: Annotated[str, _f("the invariant's name (`fsm.invariants.Invariant`)")]
    message: Annotated[str, _f("what failed, with the numbers")]
    details: Annotated[dict[str, Any], _f("the numbers that show it, per invariant")]


# --- a server log's aggregates (adapters/logs/intervals/, docs/events.md#interval-sessions) -----


class Interval(TypedDict):
    """One aggregate line of a server log (vLLM's periodic `Engine NNN:` and `SpecDecoding
    metrics:` lines, SGLang's `Prefill batch` / `Decode batch`): exactly the figures the
    line gives, each None where it gives none; rates are the engine's own over its window."""

    line: Annotated[int, _f("the log line (the first, where two lines make one interval)")]
    kind: Annotated[str, _f("the line's kind (`adapters.logs.intervals.run.IntervalKind`)")]
    clock: Annotated[str | None, _f("the log's own time of the line, as printed")]
    engine: Annotated[int | None, _f("the engine (vLLM's `Engine NNN`, a data-parallel rank)",
                                     "index")]
    prompt_tps: Annotated[float | None, _f("prompt (prefill) throughput", "tokens/s")]
    generation_tps: Annotated[float | None, _f("generation throughput", "tokens/s")]
    running: Annotated[int | None, _f("requests running", "count")]
    waiting: Annotated[int | None, _f("requests waiting (queued)", "count")]
    kv_usage: Annotated[float | None, _f("KV cache in use", "ratio")]
    prefix_hit_rate: Annotated[float | None, _f("prefix cache hit rate", "ratio")]
    mean_accept_len: Annotated[float | None, _f(
        "mean acceptance length (tokens per verify, the bonus token included)", _TOKENS)]
    accepted_tps: Annotated[float | None, _f("accepted draft tokens per second", "tokens/s")]
    drafted_tps: Annotated[float | None, _f("drafted tokens per second", "tokens/s")]
    accepted: Annotated[int | None, _f("draft tokens accepted in the window", _TOKENS)]
    drafted: Annotated[int | None, _f("draft tokens verified in the window", _TOKENS)]
    acc_per_pos: Annotated[list[float] | None, _f("acceptance rate at each draft position",
                                                  "ratio")]
    draft_acceptance: Annotated[float | None, _f("the engine's accepted / drafted", "ratio")]
    tokens: NotRequired[Annotated[int | None, _f("SGLang `#token`: KV tokens in use",
                                                 _TOKENS)]]
    new_seqs: NotRequired[Annotated[int | None, _f("SGLang prefill: new requests", "count")]]
    new_tokens: NotRequired[Annotated[int | None, _f("SGLang prefill: new prompt tokens",
                                                     _TOKENS)]]
    cached_tokens: NotRequired[Annotated[int | None, _f("SGLang prefill: prompt tokens the "
                                                        "cache held", _TOKENS)]]
    mm_hit_rate: NotRequired[Annotated[float | None, _f("vLLM: multimodal cache hit rate",
                                                        "ratio")]]
    preemptions: NotRequired[Annotated[int | None, _f(
        "vLLM: requests preempted (their KV cache taken for others) in the window", "count")]]
    mamba_num: NotRequired[Annotated[int | None, _f(
        "SGLang hybrid: Mamba state slots in use (running requests' and cached ones)",
        "count")]]
    mamba_usage: NotRequired[Annotated[float | None, _f(
        "SGLang hybrid: share of the Mamba state pool in use", "ratio")]]
    swa_tokens: NotRequired[Annotated[int | None, _f(
        "SGLang hybrid: `#swa token`, sliding-window KV tokens in use", _TOKENS)]]
    swa_usage: NotRequired[Annotated[float | None, _f(
        "SGLang hybrid: share of the sliding-window KV pool in use", "ratio")]]
    pending_tokens: NotRequired[Annotated[int | None, _f(
        "SGLang prefill: `#pending-token`, prompt tokens still to prefill", _TOKENS)]]


PAYLOADS: dict[Trigger, type] = {
    Trigger.BEGIN: Begin, Trigger.DRAFT: Draft, Trigger.VERIFY: Verify,
    Trigger.DECODE: Decode, Trigger.ACCEPT: Accept, Trigger.REJECT: Reject,
    Trigger.RESTORE: Restore, Trigger.REPLAY: Replay, Trigger.COMMIT: Commit,
    Trigger.NEXT: Next, Trigger.RETRY: Retry, Trigger.START_TURN: StartTurn,
    Trigger.PREFILL: Prefill, Trigger.CTX_SAVE: CtxSave, Trigger.CTX_RESTORE: CtxRestore,
    Trigger.END_TURN: EndTurn, Trigger.FAIL: Fail,
    Trigger.INVARIANT_VIOLATION: InvariantViolation, Trigger.LIVELOCK: Livelock,
    Trigger.INTERVAL: Interval,
}
"""Each trigger's payload type."""
