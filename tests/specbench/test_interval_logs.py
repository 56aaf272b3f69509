"""The real vLLM logs users published (../shared/real-logs/vllm), read as a user would:
every one imports with no error, each thread's incident is named, the controls get no
warning or error, the numbers the findings quote are the lines' own, and
docs/interval-logs.md is what a fresh reading gives."""

from pathlib import Path

import pytest

from specbench.interval_logs import DOC, READERS, corpus_root, page, read_corpus
from specbench.interval_logs.threads import THREADS
from specbench.real_logs import LogResult, verdict

_V = "vllm/"
_S = "sglang/"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, LogResult]:
    root = corpus_root()
    assert (root / "vllm").is_dir(), f"the real-log corpus is missing at {root}"
    db = str(tmp_path_factory.mktemp("intervals") / "r.db")
    return {r.name: r for r in read_corpus(root, db)}


def _finding(r: LogResult, kind: str) -> dict:  # type: ignore[type-arg]
    return next(f for f in r.findings if f["kind"] == kind)


def test_every_log_imports_as_sessions(results: dict[str, LogResult]) -> None:
    keys = {k for k in THREADS if k.partition("/")[0] in READERS}
    assert set(results) == keys
    for engine in ("vllm", "sglang"):
        assert {k.partition("/")[2] for k in keys if k.startswith(engine + "/")} == {
            p.name for p in (corpus_root() / engine).glob("*.log")}, engine
    for r in results.values():
        assert r.error is None and r.sessions, r.name


def test_each_thread_gets_its_verdict(results: dict[str, LogResult]) -> None:
    for key, r in results.items():
        t = THREADS[key]
        want = ("named" if t.incident is not None else "a report: not judged"
                if "performance report" in t.says else "clean")
        assert verdict(t, r) == want, (key, r.findings)


def test_the_findings_quote_the_lines(results: dict[str, LogResult]) -> None:
    slower = _finding(results[_V + "vllm-project-vllm-39680-qwen35-0.8b-mtp-slower.log"],
                      "speculation_slower")["numbers"]
    assert (slower["speculative_tps"], slower["plain_tps"]) == (128.3, 342.2)
    zero = _finding(results[_V + "vllm-project-vllm-ascend-13665-qwen3-8b-eagle3-pd-zero-"
                            "accept.log"], "acceptance_collapse")["numbers"]
    assert (zero["accepted"], zero["drafted"], zero["windows"]) == (0, 3 * 495, 3)
    dflash = _finding(results[_V + "vllm-project-speculators-613-qwen36-35b-a3b-nvfp4-dflash-"
                              "low-accept.log"], "acceptance_collapse")["numbers"]
    assert (dflash["accepted"], dflash["drafted"]) == (49 + 57, 2160 + 3945)
    assert dflash["acc_per_pos"][1:] == [0.0] * 14
    crash = results[_V + "vllm-project-vllm-40756-qwen36-27b-mtp5-tp4-ima-crash.log"]
    died = [f["numbers"] for f in crash.findings if f["kind"] == "server_crash"]
    assert [(d["failure"], d["first_line"], d["running"]) for d in died] == [
        ("worker_died", 11, 5), ("engine_died", 13, 5)]
    start = _finding(results[_V + "99sono-DockerBuildFiles-rtx5090-wsl-qwen36-27b-mtp3-"
                             "v0.20.0-startup-crash.log"], "server_crash")["numbers"]
    assert start["message"] == "RuntimeError: CUDA driver error: device not ready"


def test_the_sglang_findings_quote_the_lines(results: dict[str, LogResult]) -> None:
    loop = _finding(results[_S + "sgl-project-sglang-28179-qwen36-27b-fp8-dflash-repetition-"
                            "loop-abridged.log"], "acceptance_saturated")["numbers"]
    assert (loop["windows"], loop["mean_accept_len"], loop["running"]) == (10, 8.0, [1])
    nonetype = _finding(results[_S + "sgl-project-sglang-27325-mtp-specv2-mamba-extrabuffer-"
                                "nonetype-crash.log"], "server_crash")["numbers"]
    assert (nonetype["failure"], nonetype["first_line"], nonetype["running"]) == (
        "scheduler_crash", 5, 1)
    start = _finding(results[_S + "sostrowsk-dgx-spark-local-llm-gb10-laguna-nvfp4-dflash-"
                             "v0.5.16-failed-start.log"], "server_crash")["numbers"]
    assert start["failure"] == "startup_failed" and start["first_line"] == 66
    complete = results[_S + "sostrowsk-dgx-spark-local-llm-gb10-laguna-int4-dflash-v0.5.16-"
                       "complete.log"]
    assert _finding(complete, "engine_counter_mismatch")["numbers"]["first_line"] == 386
    assert _finding(complete, "http_errors")["numbers"]["errors"] == {
        "HTTP 400 for POST /v1/chat/completions": 3}


def test_the_page_is_a_fresh_reading(results: dict[str, LogResult]) -> None:
    fresh = page([results[n] for n in sorted(results)])
    assert Path(DOC).read_text() == fresh, "run: specledger bench interval-logs --record"
