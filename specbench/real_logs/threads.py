"""What each real llama-server log's public thread says happened, in our words, and which
findings would name it: the expectations the `real-logs` suite and its test hold the
postmortem to. The logs and their sources are in ../shared/real-logs/llama-server (its
README names each one's thread, build, hardware and settings); this table keeps only what
a reader of the thread would expect `postmortem` to say.

`visible` says whether the log's own lines show the incident: a thread fragment may stop
before its crash. A log with no incident (`incident` None) is a control: its postmortem
must name no warning and no error.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Thread:
    """One log's thread: what it says went wrong, the incident in a few words (None: no
    incident, a control), whether the lines show it, and the finding kinds that name it."""

    says: str
    incident: str | None = None
    visible: bool = True
    names: tuple[str, ...] = ()


THREADS: dict[str, Thread] = {
    "am17an-llama.cpp-6-mtp-ckpt-crash-rtx3060.log": Thread(
        "llama-server crashes between requests when it uses checkpoints (the crash lines are "
        "not in the fragments); the maintainer finds the acceptance suspiciously high, "
        "maybe an accounting error",
        "acceptance suspiciously high", names=("acceptance_implausible",)),
    "ggml-org-llama.cpp-19408-qwen3codernext-rocm-reprefill.log": Thread(
        "every llama.vim request forces a full prompt re-processing: completions take long",
        "full re-processing of the shared prefix", names=("history_reprefill",)),
    "ggml-org-llama.cpp-20176-qwen35-ckpt-load-crash.log": Thread(
        "loading any checkpoint crashes the server (the crash is past the fragment, which "
        "stops at the next request's prompt)", "crash loading a checkpoint", visible=False,
        names=("server_crash",)),
    "ggml-org-llama.cpp-22929-corrm-journald-ckpt-erase.log": Thread(
        "all checkpoints erased and 40K tokens reprocessed from scratch (#25023)",
        "every checkpoint erased", names=("checkpoints_erased",)),
    "ggml-org-llama.cpp-22929-ngrammod-qwen36-27b-ckpt-test.log": Thread(
        "the PR author's test of checkpoint placement: no failure"),
    "ggml-org-llama.cpp-22929-older-ckpt-restored.log": Thread(
        "restores the older checkpoint at 3830 though the slot's n_past is 12808",
        "an older checkpoint restored", names=("history_reprefill",)),
    "ggml-org-llama.cpp-23269-ggerganov-mtp-ngrammod-restore.log": Thread(
        "the maintainer's reference run: how the log should end"),
    "ggml-org-llama.cpp-23269-mtp-ngrammod-chain-cpu.log": Thread(
        "the chain of drafters does not seem to chain", "a drafter of the chain idle",
        names=("drafter_stats",)),
    "ggml-org-llama.cpp-23589-docker-ngrammod-kv-drop.log": Thread(
        "the KV cache loses ~4k tokens per turn (the fragment shows only the first request)",
        "KV cache drops tokens per turn", visible=False, names=("history_reprefill",)),
    "ggml-org-llama.cpp-27527-draftmtp-ckpt-inconsistent.log": Thread(
        "checkpoints are not made consistently; the b10078 fragment restores 23285 and "
        "erases three newer ones", "a checkpoint restored far behind the shared prefix",
        names=("history_reprefill",)),
    "ikawrakow-ik_llama.cpp-2226-ctx-checkpoints.log": Thread(
        "a user reads checkpoint erasure as a bug; the maintainer explains it is by design"),
    "99sono-DockerBuildFiles-rtx5090-qwen36-27b-mtp-2026-05-15.log": Thread(
        "three server runs; two requests overflow the 4 slots' shared 131072-cell KV "
        "cache (context exceeded, HTTP 500); a JSON parse error and a prefill error answered",
        "KV cache overflow", names=("kv_cache_exhausted",)),
    "99sono-DockerBuildFiles-rtx5090-qwen36-27b-mtp-2026-05-16.log": Thread(
        "the same server the next day: a performance report, no failure named"),
    "99sono-DockerBuildFiles-rtx5090-qwen36-27b-2026-05-17-b.log": Thread(
        "upstream draft-mtp tuned to n-max 2: a performance report, no failure named"),
    "99sono-DockerBuildFiles-rtx5090-qwen36-27b-2026-05-17-c.log": Thread(
        "the same, a later run: a performance report, no failure named"),
    "99sono-DockerBuildFiles-rtx5090-qwen36-27b-2026-06-01.log": Thread(
        "a performance report, no failure named"),
    "99sono-DockerBuildFiles-dgxspark-qwen36-27b-draftmtp-2026-05-19-a.log": Thread(
        "DGX Spark with draft-mtp: a performance report, no failure named"),
    "99sono-DockerBuildFiles-dgxspark-qwen36-27b-draftmtp-2026-05-19-b.log": Thread(
        "the same, a second run: a performance report, no failure named"),
    "99sono-DockerBuildFiles-dgxspark-gemma4-12b-2026-06-05.log": Thread(
        "a non-hybrid model on the same kind of server: a performance report"),
}
"""Every log of the corpus, by file name."""
