"""What to do about each kind of finding (its `fix`): one text per failure pattern, fitted to
what that pattern means, so no finding carries another's advice. A kind with more than one
cause (a failed run against a log cut short, our engine against an imported log) has one
text per cause; an invariant violation, one per invariant."""

from enum import StrEnum

from eventlog.postmortem.finding import Kind
from fsm.invariants import Invariant


class Cause(StrEnum):
    """The second cause of a kind that has two."""

    CUT_LOG = "cut_log"                    # RUN_FAILED: an imported log ends mid-request
    IMPORTED = "imported"                  # INCOMPLETE_LOG: the importer died, not a run
    DRAFT_STATE_NOT_SAVED = "draft_state"  # DRAFT_CHECKPOINT_DISCARD: too-small checkpoints
    SAMPLED = "sampled"                    # OUTPUT_MISMATCH: a sampled run's answers
    NO_PREFIX_CACHE = "no_prefix_cache"    # HISTORY_REPREFILL: the engine keeps no prefix


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
                                  "(adapters/llama/crosscheck.py names how each is read); "
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
}
"""Each kind's advice (OUTPUT_MISMATCH's names the `{reference}` session)."""

CAUSE_ADVICE: dict[Cause, str] = {
    Cause.CUT_LOG: "Import the whole log: this one ends while llama-server was still working "
                   "on the request (rotate or copy the log after the server answered or "
                   "stopped). If the server died there, its last round is what it was doing: "
                   "a restore storm there reads as a replay livelock.",
    Cause.IMPORTED: "Import the log again (`specledger import`): the importer stopped before "
                    "it closed the session; the log file itself is whole.",
    Cause.DRAFT_STATE_NOT_SAVED: "Save and restore the draft model's state with every context "
                                 "checkpoint (llama.cpp PR 22521; --draft-checkpoints keep on "
                                 "our engine).",
    Cause.SAMPLED: "Compare greedy runs (--temperature 0) for a token-level check.",
    Cause.NO_PREFIX_CACHE: "Expect every turn to prefill the conversation again while the "
                           "engine keeps no prefix cache: on vLLM's CPU build, decode plain "
                           "(--drafter none) to keep it, or run speculation on a build whose "
                           "hybrid prefix cache works with it (vLLM's GPU builds).",
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
