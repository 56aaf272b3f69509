"""What each real vLLM and SGLang log's public thread says happened, in our words, and
which findings would name it: the expectations the `interval-logs` suite and its test hold
the postmortem to. The logs and their sources are in ../shared/real-logs/<engine>/ (its
README names each one's thread, version, hardware and settings); a log is keyed by
`<engine>/<file>`. A log with no incident is a control (no warning, no error), unless its
thread is a performance report (not judged)."""

from specbench.real_logs.threads import Thread

_V = "vllm/"
THREADS: dict[str, Thread] = {
    _V + "vllm-project-vllm-40756-qwen36-27b-mtp5-tp4-ima-crash.log": Thread(
        "the engine dies with a CUDA illegal memory access on long requests (MTP k=5, TP=4); "
        "a worker dies, then the engine core", "engine crash", names=("server_crash",)),
    _V + "intel-llm-scaler-386-qwen35-9b-xpu-mtp2-crash.log": Thread(
        "the engine crashes as soon as a request runs with MTP on (Intel XPU fork; the "
        "exception's message is not in the fragments)", "engine crash",
        names=("server_crash",)),
    _V + "noonghunna-club-3090-105-2x3090-qwen36-27b-mtp6-bench.log": Thread(
        "a benchmark of MTP with 6 draft tokens: a performance report; the maintainer finds "
        "n=6 over-aggressive (positions 5-6 accept < 12%)", names=("draft_positions_wasted",)),
    _V + "vllm-project-vllm-39680-qwen35-0.8b-mtp-slower.log": Thread(
        "with MTP the generation throughput is 128.3 tok/s against 342.2 without, although "
        "96.6% of drafts are accepted (two processes pasted in one file)",
        "speculation slower", names=("speculation_slower",)),
    _V + "vllm-project-speculators-613-qwen36-35b-a3b-nvfp4-dflash-low-accept.log": Thread(
        "DFlash acceptance 1.4-2.3%: only position 1 ever accepts, despite good offline "
        "validation", "acceptance collapsed", names=("acceptance_collapse",)),
    _V + "vllm-project-vllm-ascend-13665-qwen3-8b-eagle3-pd-zero-accept.log": Thread(
        "under prefill/decode disaggregation EAGLE-3's acceptance collapses (length 2.5 -> "
        "1.3); these windows accept 0 of 495 drafted tokens", "acceptance collapsed",
        names=("acceptance_collapse",)),
    _V + "99sono-DockerBuildFiles-dgxspark-qwen36-35b-nvfp4-mtp2-v0.20.1-complete.log": Thread(
        "a whole healthy run (two days, 392 stats lines, no error)"),
    _V + "99sono-DockerBuildFiles-dgxspark-qwen36-35b-dflash6-v0.22.0-complete.log": Thread(
        "a whole run with DFlash k=6, no incident in the log"),
    _V + "99sono-DockerBuildFiles-dgxspark-qwen36-27b-nvfp4-mtp3-v0.20.2-complete.log": Thread(
        "a whole run with MTP k=3, no incident (the user asks whether k=2/3 beats 1)"),
    _V + "99sono-DockerBuildFiles-rtx5090-wsl-qwen36-27b-mtp3-v0.20.0-startup-crash.log": Thread(
        "the engine fails to start: FlashInfer's autotune warm-up meets `CUDA driver error: "
        "device not ready` (WSL2)", "startup crash", names=("server_crash",)),
    _V + "sostrowsk-dgx-spark-local-llm-gb10-qwen38-27b-nvfp4-mtp3-v0.25.1-complete.log": Thread(
        "a whole benchmark run, no incident; its planned shutdown prints an EngineDeadError "
        "traceback (shutdown noise)"),
    _V + "sostrowsk-dgx-spark-local-llm-gb10-qwen36-35b-a3b-nvfp4-mtp3-v0.25.1-complete.log": (
        Thread("a whole healthy benchmark run, clean shutdown")),
}
_S = "sglang/"
THREADS |= {
    _S + "sgl-project-sglang-27325-mtp-specv2-mamba-extrabuffer-nonetype-crash.log": Thread(
        "the scheduler dies with `TypeError: 'NoneType' object cannot be interpreted as an "
        "integer` on the spec-v2 verify path (MTP, Mamba `extra_buffer`); the fragment stops "
        "at the traceback's fourth line", "scheduler crash", names=("server_crash",)),
    _S + "sgl-project-sglang-31103-qwen36-35b-a3b-fp8-h20-v0.5.15-crash.log": Thread(
        "the scheduler still crashes while serving after the upgrade to 0.5.15 (EAGLE/MTP on "
        "a hybrid; the exception line is past the fragment)", "scheduler crash",
        names=("server_crash",)),
    _S + "sgl-project-sglang-28431-qwen36-mtp-v0.5.13-crash.log": Thread(
        "an MTP scheduler crash in 0.5.13 (SIGQUIT, a traceback through eagle_worker_v2); a "
        "commenter sees one start in five fail", "scheduler crash", names=("server_crash",)),
    _S + "sgl-project-sglang-28179-qwen36-27b-fp8-dflash-repetition-loop-abridged.log": Thread(
        "one request stuck in a repetition loop for 10 s at accept len 8.00 / accept rate "
        "1.00 (DFlash), `#full token` growing 320 a second (the reporter abridged the lines)",
        "repetition loop", names=("acceptance_saturated",)),
    _S + "sgl-project-sglang-30047-npu-qwen-hybrid-mtp-prefixcache-bench.log": Thread(
        "a PR's validation benchmark on Ascend (a hybrid with MTP, accept rate 0.71-0.97, "
        "prefix-cache hits in its second round): no incident"),
    _S + "sgl-project-sglang-11948-qwen3-8b-eagle3-a800-tp2.log": Thread(
        "a performance report: EAGLE-3 on Qwen3-8B accepts 1.8-2.2 tokens a verify and "
        "speeds up less than the paper"),
    _S + "sgl-project-sglang-10407-qwen3-next-80b-v0.5.2-ima-nospec.log": Thread(
        "`an illegal memory access was encountered` while decoding Qwen3-Next at 11 running "
        "requests, no speculation (the exception line is past the fragment)",
        "scheduler crash", names=("server_crash",)),
    _S + "sgl-project-sglang-3724-deepseek-r1-nextn-structured-output-crash.log": Thread(
        "a structured-output request with NEXTN speculation crashes the scheduler (the "
        "request itself is not in the lines)", "scheduler crash", names=("server_crash",)),
    _S + "sostrowsk-dgx-spark-local-llm-gb10-laguna-int4-dflash-v0.5.16-complete.log": Thread(
        "a whole benchmark run with DFlash (16 draft tokens), no incident named; its planned "
        "shutdown prints SIGQUIT (shutdown noise) and three requests were answered 400"),
    _S + "sostrowsk-dgx-spark-local-llm-gb10-laguna-nvfp4-dflash-v0.5.16-failed-start.log": (
        Thread("the server stops during start-up, in its first CUDA graph capture, with no "
               "error line (the repository's README blames the OOM killer)", "failed start",
               names=("server_crash",))),
}
