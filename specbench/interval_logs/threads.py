"""What each real vLLM (and SGLang) log's public thread says happened, in our words, and
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
