"""One vLLM run's lines: its failures (the engine core's fatal error, a worker's death, a
failed start, a traceback whose header a piece lacks) with their exception, last lines and
the requests running; the shutdown's own errors are none; start-up facts as logged. The
lines are the real corpus's (../shared/real-logs/vllm, read where it is)."""

from pathlib import Path

import pytest

from adapters.logs.intervals.run import FailureKind, RunEnding
from adapters.vllm.log.reader import read_file, read_lines
from specbench.interval_logs import corpus_root

REAL = corpus_root() / "vllm"


def _real(name: str) -> Path:
    path = REAL / name
    if not path.is_file():
        pytest.skip(f"the real-log corpus is not at {REAL}")
    return path


def test_a_worker_death_then_the_engine_core_with_the_requests_running() -> None:
    (run,) = read_file(_real("vllm-project-vllm-40756-qwen36-27b-mtp5-tp4-ima-crash.log")).runs
    assert run.ending is RunEnding.DIED
    assert [(f.kind, f.line, f.running) for f in run.failures] == [
        (FailureKind.WORKER_DIED, 11, 5), (FailureKind.ENGINE_DIED, 13, 5)]
    assert "SpecDecoding metrics" in run.failures[0].last_lines[-1]


def test_a_failed_start_names_its_exception() -> None:
    (run,) = read_file(_real("99sono-DockerBuildFiles-rtx5090-wsl-qwen36-27b-mtp3-v0.20.0-"
                             "startup-crash.log")).runs
    first = run.failures[0]
    assert first.kind is FailureKind.STARTUP_FAILED and first.line == 125
    assert first.message == "RuntimeError: CUDA driver error: device not ready"
    assert (run.version, run.method, run.num_spec_tokens) == ("0.20.0", "mtp", 3)


def test_a_traceback_without_its_header_is_the_engine_cores_death() -> None:
    (run,) = read_file(_real("intel-llm-scaler-386-qwen35-9b-xpu-mtp2-crash.log")).runs
    assert [f.kind for f in run.failures] == [FailureKind.ENGINE_DIED]
    assert "first lines are not in the log" in run.failures[0].message


def test_a_planned_shutdowns_errors_are_no_failure() -> None:
    (run,) = read_file(_real("sostrowsk-dgx-spark-local-llm-gb10-qwen38-27b-nvfp4-mtp3-"
                             "v0.25.1-complete.log")).runs
    assert run.ending is RunEnding.SHUTDOWN and run.failures == []
    assert len(run.intervals) == 84 and run.prefix_caching is False and run.hybrid


def test_an_engine_core_error_line_opens_a_failure_its_exception_names() -> None:
    lines = [b"(EngineCore pid=7) ERROR 05-13 10:46:44 [core.py:1138] EngineCore encountered "
             b"a fatal error.\n",
             b"(EngineCore pid=7) ERROR 05-13 10:46:44 [core.py:1138] Traceback (most recent "
             b"call last):\n",
             b"(EngineCore pid=7) ERROR 05-13 10:46:44 [core.py:1138] torch.AcceleratorError: "
             b"CUDA error: an illegal memory access was encountered\n"]
    (run,) = read_lines(lines).runs
    (f,) = run.failures
    assert f.kind is FailureKind.ENGINE_DIED
    assert f.message == "torch.AcceleratorError: CUDA error: an illegal memory access was " \
                        "encountered"


def test_what_a_shutdown_prints_is_no_failure() -> None:
    lines = [b"(APIServer pid=1) INFO 08-21 10:24:34 [launcher.py:100] [shutdown] API server: "
             b"shutdown triggered\n",
             b"(EngineCore pid=7) ERROR 08-21 10:24:34 [core.py:1138] EngineCore encountered "
             b"a fatal error.\n"]
    (run,) = read_lines(lines).runs
    assert run.failures == [] and run.ending is RunEnding.SHUTDOWN
