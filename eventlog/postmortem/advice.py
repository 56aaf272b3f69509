"""What to do about each kind of finding (its `fix`): one text per failure pattern, fitted to
what that pattern means, so no finding carries another's advice. A kind with more than one
cause (an incomplete session our engine left against one an import left, a re-prefill the
client caused against one the server did) has one text per cause; an invariant violation,
one per invariant."""

from enum import StrEnum

from eventlog.postmortem.finding import Kind
from fsm.invariants import Invariant


class Cause(StrEnum):
    """The second cause of a kind that has two."""

    IMPORTED = "imported"                  # INCOMPLETE_LOG: the importer died, not a run
    DRAFT_STATE_NOT_SAVED = "draft_state"  # DRAFT_CHECKPOINT_DISCARD: too-small checkpoints
    SAMPLED = "sampled"                    # OUTPUT_MISMATCH: a sampled run's answers
    NO_PREFIX_CACHE = "no_prefix_cache"    # HISTORY_REPREFILL: the engine keeps no prefix
    SERVER_ROLLBACK = "server_rollback"    # HISTORY_REPREFILL: the whole history matched
    KNOWN_BUILD_BUG = "known_build_bug"    # HISTORY_REPREFILL: the build has #24055
    WINDOWED_ACCEPTANCE = "windowed"       # ACCEPTANCE_COLLAPSE: an interval log's windows
    ENGINE_CORE = "engine_core"            # SERVER_CRASH: an engine core / worker process
    ENGINE_KV = "engine_kv"                # KV_CACHE_EXHAUSTED: an interval log's KV usage
    ENGINE_COUNTERS = "engine_counters"    # ENGINE_COUNTER_MISMATCH: one stats line's figures


ADVICE: dict[Kind, str] = {
    Kind.EOG_STRAY_TOKENS: "Cut the accepted block at the first EOG before any rollback "
                           "accounting (--eog-policy truncate; llama.cpp #28049, PR #28232).",
    Kind.STOP_STRAY_TOKENS: "Count only the tokens a turn sends toward its length limit, and "
                            "cut the verified block where the limit falls before it enters "
                            "the slot (llama.cpp 0.3.21 adds the whole block to n_decoded; "
                            "later builds stop inside it), or send the next request with the "
                            "answer as the server kept it.",
    Kind.HISTORY_REPREFILL: "Send the conversation back exactly as the server produced it (an "
                            "edited or re-rendered past answer, or a chat template that drops "
                            "past turns' reasoning, changes the history the slot holds); save "
                            "context checkpoints closer to the prompt end "
                            "(--ctx-checkpoint-every) so less history is prefilled again.",
    Kind.REPLAY_LIVELOCK: "Keep the forward-progress guard on (--livelock-guard) so a replay "
                          "that never agrees ends, and make replay a reconstruction of the "
                          "accepted prefix, never a new verification (--replay-policy "
                          "reconstruct; llama.cpp #28060).",
    Kind.RESTORE_STORM: "Make replay a reconstruction of the accepted prefix, never a new "
                        "verification (--replay-policy reconstruct; llama.cpp #28060): each "
                        "repeated restore verified tokens already accepted once more.",
    Kind.STATE_CONTAMINATION: "Roll the recurrent state back to the accepted boundary on "
                              "partial accept: --strategy checkpoint, per_token or "
                              "input_replay (seed 004; llama.cpp PR 19493, SGLang "
                              "intermediate states, ReplaySSM).",
    Kind.OUTPUT_MISMATCH: "Greedy speculative decoding must reproduce plain decoding: look for "
                          "the cause at that round (state contamination, a stray token, "
                          "batch-shape-dependent numerics) and compare the logs with "
                          "`specledger diff {reference} <session>`.",
    Kind.SPECULATIVE_NOT_LOSSLESS: "Do not trust this speculative method on this engine "
                                   "and model until it reproduces plain decoding: run the "
                                   "engine without it, and report the prompt, position and "
                                   "both gaps upstream (vLLM #39273 is this class: ngram "
                                   "speculation corrupting a Gated DeltaNet model's output "
                                   "while acceptance looked healthy). Suspect what only "
                                   "speculation touches: the recurrent state's rollback "
                                   "after a partial accept, the verify batch's state "
                                   "indices, the draft's cache.",
    Kind.DRAFT_CHECKPOINT_DISCARD: "Keep the draft model's checkpoints across the requests of "
                                   "a slot and restore the newest one at or before the common "
                                   "prefix (--draft-checkpoints keep; llama.cpp PR 22521).",
    Kind.ACCEPTANCE_COLLAPSE: "Stop or shorten drafting after a low-acceptance streak "
                              "(llama.cpp PR 22168 resets the n-gram drafter; ngram-mod "
                              "clears its pool), lower --draft-max, or choose a drafter that "
                              "matches this text.",
    Kind.INVARIANT_VIOLATION: "See the invariant's definition in docs/design.md#invariants.",
    Kind.ENGINE_COUNTER_MISMATCH: "Find which side miscounts before trusting either figure: "
                                  "the engine's own counter (print_timing, the answer's "
                                  "timings, a round's verdict line) or the rounds the log "
                                  "shows. Log every round (-v, LLAMA_TRACE=1 for the verdict "
                                  "lines) and check the counter's definition in this build "
                                  "(adapters/llama/ledger/crosscheck.py names how each is read); "
                                  "lines of one log that contradict each other are the "
                                  "engine's bug.",
    Kind.ACCEPTANCE_INFLATION: "Trust the rounds' acceptance, not the server's: this build "
                               "counts each checkpoint restore's replayed correction token as "
                               "an accepted draft. Use a llama.cpp with PR 26320 (merged "
                               "2026-08; llama-cpp-python 0.3.36 has it), or subtract one "
                               "accepted draft per `restoring speculative checkpoint` line "
                               "(and, on builds that count the replay as drafted too, its "
                               "replayed drafts) before comparing drafters.",
    Kind.SAMPLER_MISMATCH: "Send every sampler parameter the session claims with each request "
                           "(llama-server fills what a request leaves out with its own "
                           "defaults: top_k 40, top_p 0.95, min_p 0.05), or record the "
                           "sampler the server used as the session's.",
    Kind.RUN_FAILED: "Fix the error above; the log holds every whole round before it.",
    Kind.INCOMPLETE_LOG: "Re-run the session (`specledger replay S --rerun`) to see how it "
                         "ends.",
    Kind.CHECK_SKIPPED: "Record the session with the fields the checks need (llama-server -v; "
                        "our own engines record everything).",
    Kind.SERVER_CRASH: "Read the server's last lines above for the crash's cause (an assert, a "
                       "GPU fault, memory), reproduce it on the request it served, and report "
                       "it upstream with them; until then restart the server with the "
                       "setting that request needed turned off (e.g. --ctx-checkpoints 0 when "
                       "it died restoring a checkpoint).",
    Kind.KV_CACHE_EXHAUSTED: "Give the KV cache room for the longest prompts that run at once: "
                             "with one pool shared by all slots (kv_unified, -np auto) one "
                             "long prompt starves the others, so raise --ctx-size, lower "
                             "--parallel, or give each slot its own cells (--no-kv-unified, "
                             "--ctx-size N x slots); quantize the cache (-ctk/-ctv q8_0) to "
                             "fit more.",
    Kind.HTTP_ERRORS: "Fix each cause the server logged beside its HTTP error: a request the "
                      "server could not parse is the client's; a context exceeded is the "
                      "server's room (see kv_cache_exhausted); an error with no cause logged "
                      "needs the server's -v log of that request.",
    Kind.CHECKPOINTS_ERASED: "Keep a context checkpoint inside the history the next prompt "
                             "shares (llama.cpp #25023: every checkpoint invalidated sends the "
                             "slot back to position 0): save them more often (--ctx-checkpoint"
                             "s, --ctx-checkpoint-every) and send the conversation back "
                             "unchanged.",
    Kind.ACCEPTANCE_IMPLAUSIBLE: "Do not compare drafters or builds by this acceptance: the "
                                 "counts exceed what a verifier accepts when it samples. Check "
                                 "the build's accounting (draft tokens counted as accepted "
                                 "before verification, a draft verified against itself) with "
                                 "a greedy run against plain decoding (`specledger run "
                                 "--backend llama --temperature 0` beside --drafter none) "
                                 "and report it with these lines.",
    Kind.DRAFTER_STATS: "Drop a drafter of the chain that drafts nothing (its calls cost time "
                        "for no draft), and compare drafters by these totals, not by one "
                        "request's rate.",
    Kind.PARTIAL_REQUEST: "Import the whole log to judge these requests too: this piece "
                          "begins or ends inside them, so what they did outside it is "
                          "unknown, not zero.",
    Kind.SPECULATION_SLOWER: "Decode without speculation where it is faster: a drafter costs "
                             "its own forward and a wider verify per step, which high "
                             "acceptance repays only when the target's step is the bottleneck "
                             "(a small model, a prefill-bound batch, CUDA graphs off under "
                             "speculation all tip it); measure both at the batch sizes served "
                             "and lower num_speculative_tokens before giving up on it.",
    Kind.REQUESTS_WAITING: "Requests queued behind the running ones: raise the engine's "
                           "concurrency (vLLM --max-num-seqs, SGLang --max-running-requests) "
                           "where the KV cache has room, else give it more room "
                           "(--gpu-memory-utilization, a quantized KV cache, a shorter "
                           "--max-model-len).",
    Kind.PREFIX_CACHE_ZERO: "Turn prefix caching on for the hybrid model with speculation "
                            "where the engine supports it (vLLM's Mamba cache mode `align` "
                            "with --enable-prefix-caching; our CPU build cannot, "
                            "adapters/vllm/options.py), or expect each turn to prefill the "
                            "whole conversation again and size the prefill for it.",
    Kind.DRAFT_POSITIONS_WASTED: "Lower num_speculative_tokens to the last draft position "
                                 "that is accepted often enough to pay for its drafted "
                                 "token (the positions listed add little per verify).",
    Kind.ACCEPTANCE_SATURATED: "Read the output of the requests running then for a "
                               "repetition loop: cap their max_tokens, or set a repetition "
                               "or frequency penalty; with greedy decoding (temperature 0) a "
                               "repetitive text accepts everything without a loop.",
}
"""Each kind's advice (OUTPUT_MISMATCH's names the `{reference}` session)."""

CAUSE_ADVICE: dict[Cause, str] = {
    Cause.IMPORTED: "Import the log again (`specledger import`): the importer stopped before "
                    "it closed the session; the log file itself is whole.",
    Cause.DRAFT_STATE_NOT_SAVED: "Save and restore the draft model's state with every context "
                                 "checkpoint (llama.cpp PR 22521; --draft-checkpoints keep on "
                                 "our engine).",
    Cause.SAMPLED: "Compare greedy runs (--temperature 0) for a token-level check.",
    Cause.SERVER_ROLLBACK: "Nothing in the history changed: the prompt matched the whole "
                           "slot, yet the server went back to an older checkpoint. That "
                           "rollback is the server's (llama.cpp #24055 and PR 22929 are of "
                           "this kind): use a build that restores only a checkpoint the "
                           "history needs, and report it with these lines.",
    Cause.KNOWN_BUILD_BUG: "This build carries a known bug that prefills history again "
                           "(named beside the finding, with its fix): upgrade to a build "
                           "with the fix before changing the client.",
    Cause.NO_PREFIX_CACHE: "Expect every turn to prefill the conversation again while the "
                           "engine keeps no prefix cache: on vLLM's CPU build, decode plain "
                           "(--drafter none) to keep it, or run speculation on a build whose "
                           "hybrid prefix cache works with it (vLLM's GPU builds).",
    Cause.WINDOWED_ACCEPTANCE: "Check that the drafter matches the target (the same model "
                               "revision and tokenizer; an EAGLE or DFlash head trained on "
                               "this target's hidden states), lower num_speculative_tokens, "
                               "and compare the acceptance of one prompt offline; under "
                               "prefill/decode disaggregation check that the drafter's state "
                               "travels with the request.",
    Cause.ENGINE_CORE: "Read the failure's last lines above for its cause (a GPU fault, an "
                       "illegal memory access, a driver reset, memory), then reproduce it on "
                       "the requests it was serving with the same speculative config and "
                       "report it upstream with those lines; meanwhile restart with the "
                       "setting it points to turned off (--enforce-eager for a CUDA graph or "
                       "autotune fault, speculation for a drafter fault).",
    Cause.ENGINE_KV: "Give the KV cache more room or fewer sequences at once: raise "
                     "--gpu-memory-utilization, quantize the KV cache (--kv-cache-dtype fp8), "
                     "lower --max-num-seqs or --max-model-len; speculation's drafted tokens "
                     "hold KV cache too (num_speculative_tokens per running request).",
    Cause.ENGINE_COUNTERS: "Trust neither figure of a stats line whose counters disagree: "
                           "scrape the engine's Prometheus counters (/metrics) for the same "
                           "window and report the line upstream; a contradiction in one line "
                           "is the engine's accounting bug.",
}

INVARIANT_ADVICE: dict[Invariant, str] = {
    Invariant.SLOT_PREFIX: "Commit only the transcript: nothing behind the EOG, no rejected "
                           "draft (--eog-policy truncate).",
    Invariant.STATE_TRUTH: "Restore the recurrent state to the committed boundary on every "
                           "partial accept (--strategy checkpoint, per_token or input_replay).",
    Invariant.FORWARD_PROGRESS: "Every round must commit at least one token (the target's "
                                "own).",
    Invariant.LOSSLESS: "Greedy speculative decoding must give plain decoding's answer: find "
                        "the first round where they part (`specledger diff`).",
    Invariant.BOOKKEEPING: "Keep KV length, state position and slot length in step at commit; "
                           "drop context checkpoints beyond a trimmed slot.",
    Invariant.DRAFT_STATE: "Checkpoint and restore the draft model's own state with the "
                           "target's (a recurrent draft has the same problem).",
}
